package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
// handlers write their effects to. A nil cfg is an error: Config.Name is
// required.
func New(store idem.Store, cfg *Config) (*Inbox, error) {
	if store == nil {
		return nil, errors.New("inbox: New: store is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g, err := idem.New(store, &idem.Config{TTL: c.TTL, Now: c.Now})
	if err != nil {
		return nil, err
	}
	return &Inbox{guard: g, cfg: c, scope: ScopePrefix + c.Name}, nil
}

// Name returns the consumer name the inbox records ids under.
func (ib *Inbox) Name() string { return ib.cfg.Name }

// MaxAttempts returns Config.MaxAttempts after defaults.
func (ib *Inbox) MaxAttempts() int { return ib.cfg.MaxAttempts }

// ScopePrefix starts the scope of an inbox's records in the store they
// share with other records (HTTP keys, say): an inbox named "transfers"
// records its ids under the scope "inbox/transfers".
const ScopePrefix = "inbox/"

// Recorded statuses: what a processed message's record holds.
const (
	statusApplied = 200
	statusRefused = 422
)

// Process runs h for m unless m.ID has already taken effect for this
// consumer, and tells the broker adapter what to do with the message (see
// Outcome). h runs in the store's transaction (reach it through the store
// package's TxFrom, as with idem.Guard), and m.ID is recorded in that same
// transaction, so that the id is never marked seen before the effect
// commits, and an effect is never committed without its id.
//
// The error is nil for Applied, Duplicate and Refused; for the other
// outcomes it says why (the handler's error, the store's, a mismatch).
func (ib *Inbox) Process(ctx context.Context, m *Message, h Handler) (Outcome, error) {
	if h == nil {
		return Retry, errors.New("inbox: Process: handler is nil")
	}
	if m == nil || m.ID == "" {
		// Without an id nothing can tell a redelivery from a new
		// message: it can never be processed safely.
		return DeadLetter, ErrNoID
	}
	start := ib.cfg.Now()
	var refusal error
	res, replayed, err := ib.guard.Do(ctx, idem.Request{
		Scope:       ib.scope,
		Key:         Key(m.ID),
		Fingerprint: fingerprint(m.Body),
	}, func(ctx context.Context) (idem.Result, error) {
		herr := h(ctx, m)
		if herr == nil {
			return idem.Result{Status: statusApplied}, nil
		}
		if reason, ok := refused(herr); ok {
			// A final refusal is recorded like any answer, with what the
			// handler wrote before it refused (a handler refuses before
			// it writes, as an HTTP handler answers 4xx).
			refusal = herr
			return idem.Result{Status: statusRefused, Body: []byte(reason)}, nil
		}
		return idem.Result{}, herr
	})
	o, err := ib.outcome(m, res, replayed, refusal, err)
	ib.observe(ctx, m, o, err, start)
	return o, err
}

// outcome turns what Guard.Do said into what the adapter does.
func (ib *Inbox) outcome(m *Message, res idem.Result, replayed bool, refusal, err error) (Outcome, error) {
	switch {
	case err == nil && replayed:
		return Duplicate, nil
	case err == nil && refusal != nil:
		return Refused, refusal
	case err == nil:
		return Applied, nil
	case errors.Is(err, idem.ErrInFlight):
		// Another consumer holds this id right now and may yet fail:
		// deliver it again later rather than acknowledge it.
		return Retry, err
	case errors.Is(err, idem.ErrMismatch):
		// The id took effect with another body: a producer reused an id.
		// Redelivering cannot help, and applying it would break the
		// id's promise.
		return DeadLetter, fmt.Errorf("%w: message %q", ErrConflict, m.ID)
	case errors.Is(err, idem.ErrUnavailable):
		return Retry, err
	case m.Attempt > 0 && m.Attempt >= ib.cfg.MaxAttempts:
		return DeadLetter, fmt.Errorf("inbox: message %q failed %d times: %w", m.ID, m.Attempt, err)
	default:
		return Retry, err
	}
}

func (ib *Inbox) observe(ctx context.Context, m *Message, o Outcome, err error, start time.Time) {
	level := slog.LevelDebug
	switch o {
	case Refused, Retry:
		level = slog.LevelInfo
	case DeadLetter:
		level = slog.LevelError
	}
	if l := ib.cfg.Logger; l != nil && l.Enabled(ctx, level) {
		attrs := []slog.Attr{
			slog.String("consumer", ib.cfg.Name),
			slog.String("outcome", string(o)),
			slog.String("message_id", m.ID),
			slog.Int("attempt", m.Attempt),
		}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		l.LogAttrs(ctx, level, "inbox: "+string(o), attrs...)
	}
	if ib.cfg.Observer != nil {
		ib.cfg.Observer(Event{Consumer: ib.cfg.Name, Outcome: o, Attempt: m.Attempt, Duration: ib.cfg.Now().Sub(start)})
	}
}

// keyDigestPrefix starts the key of a message id that is not a valid
// idempotency key as it stands.
const keyDigestPrefix = "sha256:"

// Key returns the idempotency key a message id is recorded under: the id
// itself when it is a valid key (1 to 255 visible ASCII characters) that
// does not start with "sha256:", otherwise "sha256:" and the hex SHA-256
// of the id. Two different ids never share a key.
func Key(id string) string {
	if idem.ValidateKey(id) == nil && !hasPrefix(id, keyDigestPrefix) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return keyDigestPrefix + hex.EncodeToString(sum[:])
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// fingerprint identifies a message's body, so that an id reused for another
// body is told apart from a redelivery.
func fingerprint(body []byte) string {
	sum := sha256.Sum256(body)
	return "inbox-v1:" + strconv.Itoa(len(body)) + ":" + hex.EncodeToString(sum[:])
}
