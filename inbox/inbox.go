package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/idemkit/idem"
)

// Inbox runs message handlers so that each message id takes effect once per
// consumer. It is safe for concurrent use; create one per consumer name and
// store, and share it.
type Inbox struct {
	guard *idem.Guard
	cfg   Config
	scope string
}

// New returns an Inbox whose ids are recorded in store, the database the
// handlers write their effects to (pgstore, sqlitestore; memstore in
// tests). A nil cfg is an error: Config.Name is required.
func New(store idem.Store, cfg *Config) (*Inbox, error) {
	if store == nil {
		return nil, errors.New("inbox: New: store is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g, err := idem.New(store, &idem.Config{TTL: c.TTL, Now: c.Now, ReplayCacheBytes: c.ReplayCacheBytes, DisableLocalInFlight: c.DisableLocalInFlight})
	if err != nil {
		return nil, err
	}
	return &Inbox{guard: g, cfg: c, scope: ScopePrefix + c.Name}, nil
}

// ScopePrefix starts the scope of an inbox's records in the store they
// share with other records (HTTP keys, say): an inbox named "transfers"
// records its ids under the scope "inbox/transfers". The scopes of the
// other records must not start with it (name HTTP principals "user:…",
// say), or an HTTP key could stand for a message id.
const ScopePrefix = "inbox/"

// Name returns Config.Name.
func (ib *Inbox) Name() string { return ib.cfg.Name }

// Scope returns the scope the inbox records its ids under: ScopePrefix and
// its name. Records are stored under idem.StoredScope of it, with the key
// Key(id).
func (ib *Inbox) Scope() string { return ib.scope }

// MaxAttempts returns Config.MaxAttempts after defaults. An adapter whose
// broker also bounds deliveries (JetStream's MaxDeliver, say) should let
// the broker allow more, so that the inbox decides.
func (ib *Inbox) MaxAttempts() int { return ib.cfg.MaxAttempts }

// Recorded statuses: what a processed message's record holds. The record's
// body is empty for an applied message and holds the reason for a refused
// one.
const (
	statusApplied = 200
	statusRefused = 422
)

// errRefusal rolls back the transaction of a handler that refused.
var errRefusal = errors.New("inbox: handler refused the message")

// Process runs h for m unless m.ID has already taken effect (or been
// refused) for this consumer, and returns what the broker adapter must do
// with the message (see Outcome).
//
// h runs in a transaction of the store, and m.ID is recorded in that same
// transaction, unique per (consumer name, id): the id is never marked seen
// before the effect commits, and an effect never commits without its id.
// Once h has returned nil the transaction commits even if ctx is cancelled
// meanwhile (within 30 seconds), so that the redelivery is a Duplicate.
//
//   - h returns nil: Applied, or Duplicate if the id took effect first in
//     another transaction (whose effect stands; this one's is rolled back).
//   - h returns an error made with Refuse: whatever h wrote is rolled back
//     and the refusal alone is recorded with the id, in a second, short
//     transaction: Refused, with h's error.
//   - h returns another error, or panics: everything is rolled back and
//     nothing recorded: Retry, or DeadLetter from attempt
//     Config.MaxAttempts on, with h's error (a panic is recovered and
//     becomes an error).
//   - The id is recorded already with the same body: Duplicate, h does not
//     run. With another body: DeadLetter with ErrConflict.
//   - Another call holds the id right now (a concurrent delivery to
//     another consumer of the same name, which may yet fail): Retry with
//     an error matching idem.ErrInFlight; h does not run.
//   - The store fails: Retry with an error matching idem.ErrUnavailable.
//   - m has no ID: DeadLetter with ErrNoID.
//
// The error is nil for Applied and Duplicate.
func (ib *Inbox) Process(ctx context.Context, m *Message, h Handler) (Outcome, error) {
	if h == nil {
		return Retry, errors.New("inbox: Process: handler is nil")
	}
	if m == nil {
		m = &Message{}
	}
	start := ib.cfg.Now()
	o, err := ib.process(ctx, m, h)
	ib.observe(ctx, m, o, err, start)
	return o, err
}

func (ib *Inbox) process(ctx context.Context, m *Message, h Handler) (Outcome, error) {
	if m.ID == "" {
		return DeadLetter, ErrNoID
	}
	req := idem.Request{Scope: ib.scope, Key: Key(m.ID), Fingerprint: fingerprint(m.Body)}
	var refused, failed error
	_, replayed, err := ib.guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
		herr := run(ctx, m, h)
		switch {
		case herr == nil:
			return idem.Result{Status: statusApplied}, nil
		case errors.Is(herr, ErrRefused):
			refused = herr
			return idem.Result{}, errRefusal
		default:
			failed = herr
			return idem.Result{}, herr
		}
	})
	switch {
	case err == nil && replayed:
		return Duplicate, nil
	case err == nil:
		return Applied, nil
	case refused != nil:
		return ib.refuse(ctx, m, req, refused)
	case failed != nil:
		if m.Attempt > 0 && m.Attempt >= ib.cfg.MaxAttempts {
			return DeadLetter, fmt.Errorf("inbox: message %q failed on attempt %d of %d: %w", m.ID, m.Attempt, ib.cfg.MaxAttempts, failed)
		}
		return Retry, failed
	}
	return ib.storeOutcome(m, err)
}

// refuse records the refusal of m in a transaction of its own: the
// handler's has been rolled back with whatever it wrote.
func (ib *Inbox) refuse(ctx context.Context, m *Message, req idem.Request, refused error) (Outcome, error) {
	body := reason(refused)
	_, replayed, err := ib.guard.Do(ctx, req, func(context.Context) (idem.Result, error) {
		return idem.Result{Status: statusRefused, Body: body}, nil
	})
	switch {
	case err == nil && replayed:
		// Another delivery settled the id between the two
		// transactions; its outcome stands.
		return Duplicate, nil
	case err == nil:
		return Refused, refused
	}
	return ib.storeOutcome(m, err)
}

// storeOutcome maps an error of the guard that is not the handler's.
func (ib *Inbox) storeOutcome(m *Message, err error) (Outcome, error) {
	switch {
	case errors.Is(err, idem.ErrMismatch):
		// The id took effect with another body: a producer reused an
		// id. Redelivering cannot help, and applying it would break
		// the id's promise.
		return DeadLetter, fmt.Errorf("%w: message %q", ErrConflict, m.ID)
	default:
		// In flight elsewhere (that delivery may yet fail, so this one
		// must not be acknowledged) or the store failed: nothing was
		// recorded, deliver again.
		return Retry, err
	}
}

// run calls h, turning a panic into an error: the transaction then rolls
// back like for any failure, and a message that always panics is
// dead-lettered after Config.MaxAttempts instead of crashing every
// consumer that receives it.
func run(ctx context.Context, m *Message, h Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{value: p, stack: debug.Stack()}
		}
	}()
	return h(ctx, m)
}

type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("inbox: handler panicked: %v", e.value) }

func (ib *Inbox) observe(ctx context.Context, m *Message, o Outcome, err error, start time.Time) {
	level := slog.LevelDebug
	switch o {
	case Refused, Retry:
		level = slog.LevelInfo
	case DeadLetter:
		level = slog.LevelError
	}
	var pe *panicError
	if errors.As(err, &pe) {
		level = slog.LevelError
	}
	if l := ib.cfg.Logger; l != nil && l.Enabled(ctx, level) {
		attrs := []slog.Attr{
			slog.String("consumer", ib.cfg.Name),
			slog.String("outcome", string(o)),
			slog.String("key_sha256", idem.KeyHash(Key(m.ID))),
			slog.Int("attempt", m.Attempt),
		}
		if err != nil {
			attrs = append(attrs, slog.String("err", redact(err.Error(), m.ID)))
		}
		if pe != nil {
			attrs = append(attrs, slog.String("stack", string(pe.stack)))
		}
		l.LogAttrs(ctx, level, "inbox: "+string(o), attrs...)
	}
	if ib.cfg.Observer != nil {
		ib.cfg.Observer(Event{
			Consumer: ib.cfg.Name, MessageID: m.ID, Outcome: o, Attempt: m.Attempt,
			Duration: ib.cfg.Now().Sub(start), Err: err,
		})
	}
}
