package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CompleterConfig configures a Completer. The zero value, and a nil
// *CompleterConfig, mean defaults.
type CompleterConfig struct {
	// Interval is the pause between two passes of Run. Defaults to 5
	// seconds.
	Interval time.Duration
	// Limit is the most abandoned records one pass takes. Defaults to 100.
	Limit int
	// Concurrency is how many records one pass works on at once. Defaults
	// to 4.
	Concurrency int
	// MinBackoff and MaxBackoff bound the wait before a record whose
	// attempt failed is tried again: MinBackoff·2^(attempts-1), at most
	// MaxBackoff. Default to 1 second and 5 minutes.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// ReportAfter is how long a record may stay pending before each failed
	// attempt on it is reported as needing a human (an ERROR log line and
	// CompleterEvent.Stuck); the completer keeps trying it. Defaults to 15
	// minutes.
	ReportAfter time.Duration
	// Logger receives a line per failed attempt and per record reported.
	// A line names its record by scope_sha256 and key_sha256, the KeyHash
	// of its stored scope and of its key (key_sha256 is what idemhttp's
	// lines and idemotel's spans carry), never by the scope or key, which
	// may hold a principal derived from a credential; the error it carries
	// has them replaced by those digests too. Defaults to slog.Default().
	Logger *slog.Logger
	// Observe, if set, is called once per record a pass handles (for
	// metrics). It must be safe for concurrent use.
	Observe func(CompleterEvent)
}

// Completer outcomes, in CompleterEvent.Outcome.
const (
	CompleterCompleted   = "completed"    // the work finished and its result is recorded
	CompleterFailed      = "failed"       // the work failed again; retried after a backoff
	CompleterSkipped     = "skipped"      // someone else claimed the record first
	CompleterUnknownKind = "unknown-kind" // no work is registered for the record's kind
	CompleterUnavailable = "unavailable"  // the store failed
)

// CompleterEvent describes what a pass did with one abandoned record.
type CompleterEvent struct {
	// Scope (stored form) and Key are the record's, as they are: an
	// Observe that logs or labels metrics must use KeyHash of them.
	Scope, Key, Kind string
	// Attempt is the record's attempt count after this pass's claim.
	Attempt  int
	Outcome  string
	Err      error
	Duration time.Duration
	// Stuck reports that the record has been pending longer than
	// ReportAfter and still is.
	Stuck bool
}

// CompleterReport counts what one pass did.
type CompleterReport struct {
	Found, Completed, Failed, Skipped, UnknownKind, Unavailable int
	// Stuck counts the records reported as needing a human.
	Stuck int
}

// Completer finishes leased work that was abandoned: records still pending
// after their lease ended because the holder crashed, or its client gave up
// after a failure. For each it claims the record and runs the work
// registered for its kind (Leased.Register), which resumes after its last
// recovery point. A work that fails is released with a growing backoff and
// tried again; the work decides which failures are final (it then returns
// a result, after a compensating step where one is needed), so an unknown
// outcome is retried and never compensated by the completer.
//
// A completed record expires after the TTL its call was claimed with
// (Record.TTL), not LeasedConfig.TTL, which applies only to a record that
// carries none. Its log lines carry digests of scopes and keys, never the
// values (see CompleterConfig.Logger).
type Completer struct {
	leased *Leased
	cfg    CompleterConfig
}

// NewCompleter returns a Completer for l's store and registered kinds.
func NewCompleter(l *Leased, cfg *CompleterConfig) (*Completer, error) {
	if l == nil {
		return nil, errors.New("idem: NewCompleter: Leased is nil")
	}
	var c CompleterConfig
	if cfg != nil {
		c = *cfg
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Interval", c.Interval}, {"MinBackoff", c.MinBackoff}, {"MaxBackoff", c.MaxBackoff}, {"ReportAfter", c.ReportAfter}} {
		if d.v < 0 {
			return nil, fmt.Errorf("idem: CompleterConfig.%s must not be negative, got %s", d.name, d.v)
		}
	}
	if c.Limit < 0 || c.Concurrency < 0 {
		return nil, fmt.Errorf("idem: CompleterConfig.Limit and Concurrency must not be negative, got %d and %d", c.Limit, c.Concurrency)
	}
	if c.Interval == 0 {
		c.Interval = 5 * time.Second
	}
	if c.Limit == 0 {
		c.Limit = 100
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 5 * time.Minute
	}
	if c.MaxBackoff < c.MinBackoff {
		return nil, fmt.Errorf("idem: CompleterConfig.MaxBackoff (%s) must not be shorter than MinBackoff (%s)", c.MaxBackoff, c.MinBackoff)
	}
	if c.ReportAfter == 0 {
		c.ReportAfter = 15 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Completer{leased: l, cfg: c}, nil
}

// Run runs a pass every Interval until ctx is done, and returns ctx's
// error. A pass that fails is logged and the next one runs on time.
func (c *Completer) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("idem: completer pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// RunOnce handles at most Limit abandoned records, Concurrency at a time,
// and reports what it did. It returns an error only if the store could not
// list them.
func (c *Completer) RunOnce(ctx context.Context) (CompleterReport, error) {
	l := c.leased
	recs, err := l.store.Abandoned(ctx, &AbandonedParams{Now: l.cfg.Now(), Limit: c.cfg.Limit})
	if err != nil {
		return CompleterReport{}, unavailable("abandoned", err)
	}
	rep := CompleterReport{Found: len(recs)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.cfg.Concurrency)
	for _, rec := range recs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ev := c.handle(ctx, rec)
			mu.Lock()
			switch ev.Outcome {
			case CompleterCompleted:
				rep.Completed++
			case CompleterFailed:
				rep.Failed++
			case CompleterSkipped:
				rep.Skipped++
			case CompleterUnknownKind:
				rep.UnknownKind++
			case CompleterUnavailable:
				rep.Unavailable++
			}
			if ev.Stuck {
				rep.Stuck++
			}
			mu.Unlock()
			if c.cfg.Observe != nil {
				c.cfg.Observe(ev)
			}
		}()
	}
	wg.Wait()
	return rep, nil
}

// backoff is the wait after a record's attempt-th failed attempt.
func (c *Completer) backoff(attempts int) time.Duration {
	d := c.cfg.MinBackoff
	for i := 1; i < attempts && d < c.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.cfg.MaxBackoff)
}

func (c *Completer) handle(ctx context.Context, rec *Record) (ev CompleterEvent) {
	l := c.leased
	start := time.Now()
	ev = CompleterEvent{Scope: rec.Scope, Key: rec.Key, Kind: rec.Kind, Attempt: rec.Attempts}
	defer func() { ev.Duration = time.Since(start) }()
	now := l.cfg.Now()
	claim, err := l.store.Claim(ctx, &ClaimParams{
		Scope: rec.Scope, Key: rec.Key, Fingerprint: rec.Fingerprint,
		Kind: rec.Kind, Input: rec.Input, TTL: recordTTL(rec, l.cfg.TTL), Now: now, Lease: l.cfg.Lease,
	})
	if err != nil {
		ev.Outcome, ev.Err = CompleterUnavailable, err
		c.cfg.Logger.Warn("idem: completer could not claim a record", append(logAttrs(rec), "err", redactedError(err, rec))...)
		return ev
	}
	if !claim.Claimed {
		ev.Outcome = CompleterSkipped
		return ev
	}
	ev.Attempt = claim.Record.Attempts
	work := l.work(rec.Kind)
	if work == nil {
		ev.Outcome = CompleterUnknownKind
		ev.Err = fmt.Errorf("idem: no work is registered for kind %q", rec.Kind)
		l.release(ctx, claim, ev.Err.Error(), c.cfg.MaxBackoff)
	} else {
		_, err = l.execute(ctx, claim, recordTTL(claim.Record, l.cfg.TTL), work, c.backoff(claim.Record.Attempts), false)
		if err == nil {
			ev.Outcome = CompleterCompleted
			c.cfg.Logger.Info("idem: completer finished abandoned work", append(logAttrs(rec), "attempt", ev.Attempt)...)
			return ev
		}
		ev.Outcome, ev.Err = CompleterFailed, err
	}
	ev.Stuck = now.Sub(claim.Record.CreatedAt) >= c.cfg.ReportAfter
	attrs := append(logAttrs(rec), "attempt", ev.Attempt,
		"pending_for", now.Sub(claim.Record.CreatedAt).Round(time.Second).String(), "err", redactedError(ev.Err, rec))
	if ev.Stuck {
		c.cfg.Logger.Error("idem: leased work still pending past its report time; it needs a human", attrs...)
	} else {
		c.cfg.Logger.Warn("idem: completer attempt failed; will retry", attrs...)
	}
	return ev
}

// logAttrs name rec in a log line by digests (see CompleterConfig.Logger).
func logAttrs(rec *Record) []any {
	return []any{"scope_sha256", KeyHash(rec.Scope), "key_sha256", KeyHash(rec.Key), "kind", rec.Kind}
}

// redactMin is the shortest scope or key that redactedError replaces where
// it is not quoted: a shorter one would also match ordinary words.
const redactMin = 8

// redactedError is err's text with rec's scope and key replaced by their
// digests: where quoted (as stores quote them in their errors), and as
// they are when at least redactMin bytes long.
func redactedError(err error, rec *Record) string {
	msg := err.Error()
	for _, v := range []struct{ name, value string }{{"scope", rec.Scope}, {"key", rec.Key}} {
		if v.value == "" {
			continue
		}
		digest := v.name + "_sha256:" + KeyHash(v.value)
		msg = strings.ReplaceAll(msg, strconv.Quote(v.value), digest)
		if len(v.value) >= redactMin {
			msg = strings.ReplaceAll(msg, v.value, digest)
		}
	}
	return msg
}
