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

	// Grace is how long past its expiry a record is kept before a sweep
	// deletes it. Expiry is checked exactly on read, by the clock of the
	// process that reads; the sweeper deletes by its own clock, and a
	// host whose clock runs ahead would otherwise delete records that
	// hosts with a correct clock still replay, so that a retry arriving
	// in that gap runs the work again. Grace covers that much clock skew
	// between the sweeping host and every host that serves the store. It
	// costs storage only (each record is kept Grace longer), never an
	// answer. Defaults to 10 minutes.
	Grace time.Duration

	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time

	// Logger receives one line per failed sweep in Run. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// defaultSweepGrace is SweeperConfig.Grace's default: ample for hosts whose
// clocks are kept by NTP (milliseconds apart) and for a host whose time
// synchronisation has failed for a while (minutes apart), while keeping
// records only a little longer than their TTL.
const defaultSweepGrace = 10 * time.Minute

// Sweeper deletes expired records in bounded batches. Expiry is already
// enforced on read, so sweeping only reclaims space; it never changes an
// answer, as long as the clocks of the sweeping host and of the hosts that
// serve the store differ by less than SweeperConfig.Grace.
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
	case c.Grace < 0:
		return nil, fmt.Errorf("idem: SweeperConfig.Grace must not be negative, got %s", c.Grace)
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.Interval == 0 {
		c.Interval = time.Minute
	}
	if c.Grace == 0 {
		c.Grace = defaultSweepGrace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Sweeper{store: store, cfg: c}, nil
}

// Sweep deletes the records that had expired Grace before the time it
// starts, batch by batch, until a batch comes back short, and returns how
// many it deleted. It stops early, returning the count so far and the
// error, when a batch fails or ctx is done.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	now := s.cfg.Now().Add(-s.cfg.Grace)
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
