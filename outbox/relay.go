package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// RelayConfig configures a Relay. The zero value, and a nil *RelayConfig,
// mean defaults.
type RelayConfig struct {
	// BatchSize is the most messages one claim takes. Defaults to 100.
	BatchSize int
	// PollInterval is the longest the relay waits between two claims when
	// the outbox looked empty. A Source that wakes the relay (Waiter)
	// makes it start sooner. Defaults to 1 second.
	PollInterval time.Duration
	// MaxAttempts is how many refusals of a message (errors matching
	// ErrRefused) park it. Defaults to 10. A claim whose every message
	// was refused is followed by a backoff (from 50 ms, doubling up to 1
	// second or MaxBackoff), so that a broker refusing everything (a
	// missing stream or binding) parks a message after about 6 seconds
	// with the defaults, not within milliseconds.
	MaxAttempts int
	// Retention is how long a sent message is kept before a sweep deletes
	// it. Defaults to 24 hours. Negative: never swept.
	Retention time.Duration
	// SweepInterval is how often the relay sweeps. Defaults to 1 minute.
	SweepInterval time.Duration
	// MaxBackoff bounds the wait after a failed claim or publish, which
	// doubles from 50 milliseconds. Defaults to 5 seconds.
	MaxBackoff time.Duration
	// PublishTimeout bounds one publish (or one batch). Defaults to 30
	// seconds.
	PublishTimeout time.Duration
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// Logger receives one line per failure and per parked message.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Defaults of RelayConfig.
const (
	DefaultBatchSize      = 100
	DefaultPollInterval   = time.Second
	DefaultMaxAttempts    = 10
	DefaultRetention      = 24 * time.Hour
	DefaultSweepInterval  = time.Minute
	DefaultMaxBackoff     = 5 * time.Second
	DefaultPublishTimeout = 30 * time.Second
	minBackoff            = 50 * time.Millisecond
	maxRefusalBackoff     = time.Second
	sweepBatch            = 1000
)

func (c *RelayConfig) withDefaults() (RelayConfig, error) {
	var o RelayConfig
	if c != nil {
		o = *c
	}
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"BatchSize", o.BatchSize < 0}, {"PollInterval", o.PollInterval < 0},
		{"MaxAttempts", o.MaxAttempts < 0}, {"SweepInterval", o.SweepInterval < 0},
		{"MaxBackoff", o.MaxBackoff < 0}, {"PublishTimeout", o.PublishTimeout < 0},
	} {
		if f.neg {
			return o, fmt.Errorf("outbox: RelayConfig.%s must not be negative", f.name)
		}
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	def(&o.PollInterval, DefaultPollInterval)
	def(&o.Retention, DefaultRetention)
	def(&o.SweepInterval, DefaultSweepInterval)
	def(&o.MaxBackoff, DefaultMaxBackoff)
	def(&o.PublishTimeout, DefaultPublishTimeout)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Relay publishes the committed messages of a Source through a Publisher:
// claim a batch in staging order, publish each message (in order; the
// messages of a partition key after one that failed wait for the next
// claim), mark sent those the broker confirmed, count the refusals and
// park a message refused MaxAttempts times. A Relay is safe for
// concurrent use; run it with Run.
type Relay struct {
	src Source
	pub Publisher
	cfg RelayConfig
	err error // of the configuration, returned by Run

	published, refused, parked, failures, sweptN atomic.Uint64
	lastSweep                                    atomic.Int64 // Unix ns
}

// NewRelay returns a relay from src to pub. A nil cfg means defaults. An
// invalid configuration makes Run (and RunOnce) return its error.
func NewRelay(src Source, pub Publisher, cfg *RelayConfig) *Relay {
	c, err := cfg.withDefaults()
	if err == nil && src == nil {
		err = errors.New("outbox: NewRelay: the Source is nil")
	}
	if err == nil && pub == nil {
		err = errors.New("outbox: NewRelay: the Publisher is nil")
	}
	return &Relay{src: src, pub: pub, cfg: c, err: err}
}

// RelayStats are a relay's counters since NewRelay.
type RelayStats struct {
	// Published counts the messages the broker confirmed and the relay
	// marked sent.
	Published uint64
	// Refused counts the refusals (errors matching ErrRefused) recorded.
	Refused uint64
	// Parked counts the messages this relay parked.
	Parked uint64
	// Failures counts the failed claims, marks and publishes that were
	// not refusals (the broker or the database unavailable).
	Failures uint64
	// Swept counts the sent messages deleted.
	Swept uint64
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{
		Published: r.published.Load(), Refused: r.refused.Load(), Parked: r.parked.Load(),
		Failures: r.failures.Load(), Swept: r.sweptN.Load(),
	}
}

// Source returns the relay's Source, for its Backlog.
func (r *Relay) Source() Source { return r.src }

// Run relays until ctx is done, then returns nil (or at once the error of
// an invalid configuration). Failures are logged and retried with a
// backoff; they never stop it.
func (r *Relay) Run(ctx context.Context) error {
	if r.err != nil {
		return r.err
	}
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		n, sent, err := r.runOnce(ctx)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			r.cfg.Logger.ErrorContext(ctx, "outbox: relay failed; retrying", "err", err)
			backoff = min(max(2*backoff, minBackoff), r.cfg.MaxBackoff)
			sleep(ctx, backoff)
			continue
		}
		if n > 0 && sent == 0 {
			// The broker refused every message of the claim: most
			// likely it is misconfigured (a stream or a binding
			// missing), not the messages. Retrying at once would
			// hammer it and spend their attempts in a few
			// milliseconds; the backoff spreads them over seconds.
			backoff = min(max(2*backoff, minBackoff), r.cfg.MaxBackoff, maxRefusalBackoff)
			r.cfg.Logger.WarnContext(ctx, "outbox: the broker refused every message of the batch; backing off", "messages", n, "wait", backoff)
			sleep(ctx, backoff)
			continue
		}
		backoff = 0
		r.maybeSweep(ctx)
		if n >= r.cfg.BatchSize {
			continue // more may be waiting
		}
		r.wait(ctx)
	}
	return nil
}

func (r *Relay) wait(ctx context.Context) {
	if w, ok := r.src.(Waiter); ok {
		if err := w.Wait(ctx, r.cfg.PollInterval); err != nil && ctx.Err() == nil {
			r.failures.Add(1)
			r.cfg.Logger.WarnContext(ctx, "outbox: waiting for notifications failed; polling", "err", err)
			sleep(ctx, min(r.cfg.PollInterval, r.cfg.MaxBackoff))
		}
		return
	}
	sleep(ctx, r.cfg.PollInterval)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// RunOnce claims one batch, publishes it and records the outcome. It
// returns how many messages the claim held and the first failure that
// was not a refusal (the batch's confirmed messages are still marked
// sent).
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	n, _, err := r.runOnce(ctx)
	return n, err
}

// runOnce is RunOnce, which also returns how many messages it marked sent.
func (r *Relay) runOnce(ctx context.Context) (n, sent int, err error) {
	if r.err != nil {
		return 0, 0, r.err
	}
	c, err := r.src.Claim(ctx, r.cfg.BatchSize)
	if err != nil {
		r.failures.Add(1)
		return 0, 0, fmt.Errorf("outbox: claim: %w", err)
	}
	msgs := c.Messages()
	if len(msgs) == 0 {
		return 0, 0, c.Abort(ctx)
	}
	o := &Outcome{MaxAttempts: r.cfg.MaxAttempts}
	pubErr := r.publish(ctx, msgs, o)
	// The confirmed messages are marked even if ctx has ended meanwhile:
	// the broker holds them.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	defer cancel()
	o.Now = r.cfg.Now()
	parked, err := c.Finish(fctx, o)
	if err != nil {
		_ = c.Abort(fctx)
		r.failures.Add(1)
		return len(msgs), 0, fmt.Errorf("outbox: mark %d sent: %w", len(o.Sent), err)
	}
	r.published.Add(uint64(len(o.Sent)))
	r.refused.Add(uint64(len(o.Failed)))
	if len(parked) > 0 {
		r.parked.Add(uint64(len(parked)))
		for _, id := range parked {
			r.cfg.Logger.ErrorContext(ctx, "outbox: message parked after repeated refusals", "id", id,
				"attempts", r.cfg.MaxAttempts, "err", failureOf(o.Failed, id))
		}
	}
	if pubErr != nil {
		r.failures.Add(1)
		return len(msgs), len(o.Sent), pubErr
	}
	return len(msgs), len(o.Sent), nil
}

func failureOf(fs []Failure, id string) string {
	for _, f := range fs {
		if f.ID == id {
			return f.Error
		}
	}
	return ""
}

// publish publishes msgs in order and fills o. A partition whose message
// failed publishes nothing more in this batch; a failure that is not a
// refusal stops the batch and is returned.
func (r *Relay) publish(ctx context.Context, msgs []Envelope, o *Outcome) error {
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	blocked := map[string]bool{}
	if bp, ok := r.pub.(BatchPublisher); ok {
		errs := bp.PublishBatch(pctx, msgs)
		if len(errs) != len(msgs) {
			return fmt.Errorf("outbox: publisher %T returned %d results for %d messages", r.pub, len(errs), len(msgs))
		}
		var first error
		for i, e := range msgs {
			if e.PartitionKey != "" && blocked[e.PartitionKey] {
				continue // published out of turn: republished after the one that failed
			}
			switch err := errs[i]; {
			case err == nil:
				o.Sent = append(o.Sent, e.ID)
			case errors.Is(err, ErrRefused):
				o.Failed = append(o.Failed, Failure{ID: e.ID, Error: err.Error()})
				blocked[e.PartitionKey] = e.PartitionKey != ""
			default:
				if first == nil {
					first = fmt.Errorf("outbox: publish %s: %w", e.ID, err)
				}
				blocked[e.PartitionKey] = e.PartitionKey != ""
			}
		}
		return first
	}
	for _, e := range msgs {
		if e.PartitionKey != "" && blocked[e.PartitionKey] {
			continue
		}
		err := r.pub.Publish(pctx, e)
		switch {
		case err == nil:
			o.Sent = append(o.Sent, e.ID)
		case errors.Is(err, ErrRefused):
			o.Failed = append(o.Failed, Failure{ID: e.ID, Error: err.Error()})
			if e.PartitionKey != "" {
				blocked[e.PartitionKey] = true
			}
		default:
			return fmt.Errorf("outbox: publish %s: %w", e.ID, err)
		}
	}
	return nil
}

func (r *Relay) maybeSweep(ctx context.Context) {
	if r.cfg.Retention < 0 {
		return
	}
	now := r.cfg.Now().UnixNano()
	if last := r.lastSweep.Load(); last != 0 && time.Duration(now-last) < r.cfg.SweepInterval {
		return
	}
	r.lastSweep.Store(now)
	n, err := r.Sweep(ctx)
	if err != nil && ctx.Err() == nil {
		r.cfg.Logger.WarnContext(ctx, "outbox: sweep failed", "deleted", n, "err", err)
	}
}

// Sweep deletes, batch by batch, the messages sent more than Retention
// ago, and returns how many it deleted.
func (r *Relay) Sweep(ctx context.Context) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	before := r.cfg.Now().Add(-r.cfg.Retention)
	total := 0
	for ctx.Err() == nil {
		n, err := r.src.Sweep(ctx, before, sweepBatch)
		total += n
		r.sweptN.Add(uint64(n))
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
	return total, ctx.Err()
}
