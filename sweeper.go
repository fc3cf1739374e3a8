package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// SweeperConfig configures a Sweeper. The zero value, and a nil
// *SweeperConfig, mean defaults.
type SweeperConfig struct {
	// BatchSize is the most records one DeleteExpired call deletes; small
	// batches keep each statement short. Defaults to 1000.
	BatchSize int

	// Pause is how long Sweep waits between two batches, leaving room for
	// the hot path. Defaults to 0 (no pause).
	Pause time.Duration

	// Interval is how often Run sweeps. Defaults to 1 minute.
	Interval time.Duration

	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time

	// Logger receives one line per failed sweep in Run. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Sweeper deletes expired records in bounded batches. Expiry is already
// enforced on read, so sweeping only reclaims space; it never changes an
// answer.
type Sweeper struct {
	store ExpiredDeleter
	cfg   SweeperConfig
}

// NewSweeper returns a Sweeper over store. A nil cfg means defaults.
func NewSweeper(store ExpiredDeleter, cfg *SweeperConfig) (*Sweeper, error) {
	if store == nil {
		return nil, errors.New("idem: NewSweeper: store is nil")
	}
	var c SweeperConfig
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.BatchSize < 0:
		return nil, fmt.Errorf("idem: SweeperConfig.BatchSize must not be negative, got %d", c.BatchSize)
	case c.Pause < 0:
		return nil, fmt.Errorf("idem: SweeperConfig.Pause must not be negative, got %s", c.Pause)
	case c.Interval < 0:
		return nil, fmt.Errorf("idem: SweeperConfig.Interval must not be negative, got %s", c.Interval)
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.Interval == 0 {
		c.Interval = time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Sweeper{store: store, cfg: c}, nil
}

// Sweep deletes the records expired at the time it starts, batch by batch,
// until a batch comes back short, and returns how many it deleted. It stops
// early, returning the count so far and the error, when a batch fails or ctx
// is done.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := s.store.DeleteExpired(ctx, &DeleteExpiredParams{Now: now, Limit: s.cfg.BatchSize})
		total += n
		if err != nil {
			return total, err
		}
		if n < s.cfg.BatchSize {
			return total, nil
		}
		if s.cfg.Pause > 0 {
			t := time.NewTimer(s.cfg.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return total, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// Run sweeps once at start and then every Interval until ctx is done; it
// then returns nil. A failed sweep is logged and retried at the next tick.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.ErrorContext(ctx, "idem: sweep failed", "deleted", n, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
