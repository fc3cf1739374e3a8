package inbox

import (
	"context"
	"errors"
	"time"
)

// Message is one delivery of a message, as a broker adapter hands it over.
type Message struct {
	// ID names the message: the broker's message id, or an id the
	// adapter derived from the message (a business id in the body). Two
	// deliveries with one ID are one message. Required.
	ID string

	// Body is the message's payload.
	Body []byte

	// Header holds the message's headers, if the broker has any.
	Header map[string][]string

	// Attempt is the delivery count: 1 for the first delivery, 0 when the
	// broker does not say.
	Attempt int

	// Raw is the broker's own message (a jetstream.Msg, an
	// amqp091.Delivery), for handlers that ask for it.
	Raw any
}

// Handler applies one message's effect through the store's transaction that
// ctx carries. It returns nil when the effect is done, an error made with
// Refuse when the message can never succeed (malformed, or refused by the
// business rules), and any other error to have the message delivered
// again.
type Handler func(ctx context.Context, m *Message) error

// Outcome is what Process did with a message, and so what a broker adapter
// does with it: Applied, Duplicate and Refused are acknowledged; Retry is
// delivered again (nak, requeue); DeadLetter is taken out of the flow
// (terminated, or rejected to a dead-letter exchange). Its values are
// stable: they are used as metric labels.
type Outcome string

// Outcomes of Process.
const (
	// Applied: the handler ran and its effect committed with the id.
	Applied Outcome = "applied"
	// Duplicate: the id had already taken effect (or been refused); the
	// handler did not run and nothing was committed.
	Duplicate Outcome = "duplicate"
	// Refused: the handler refused the message for good (see Refuse);
	// the refusal is recorded with the id, so a redelivery is a
	// Duplicate.
	Refused Outcome = "refused"
	// Retry: the handler or the store failed, or another consumer is
	// processing the same id right now; nothing was committed.
	Retry Outcome = "retry"
	// DeadLetter: the message cannot be processed: it has no id, it
	// failed Config.MaxAttempts times, or its id already took effect
	// with another body. Nothing was committed.
	DeadLetter Outcome = "dead_letter"
)

// Outcomes returns every Outcome, for metrics that pre-declare their labels.
func Outcomes() []Outcome { return []Outcome{Applied, Duplicate, Refused, Retry, DeadLetter} }

// Settled reports whether the broker should acknowledge the message: it
// has taken effect, was refused for good, or was already processed.
func (o Outcome) Settled() bool { return o == Applied || o == Duplicate || o == Refused }

// Errors of Process.
var (
	// ErrRefused matches an error made with Refuse.
	ErrRefused = errors.New("inbox: message refused")

	// ErrNoID means the message had no id.
	ErrNoID = errors.New("inbox: message has no id")

	// ErrConflict means the message's id already took effect with another
	// body.
	ErrConflict = errors.New("inbox: message id already used with another body")
)

// Refuse marks err as a final refusal: the message can never succeed, so
// it is settled (recorded and acknowledged), not delivered again. The
// handler must refuse before it writes anything it would not want
// committed: a refusal commits with the id, as an HTTP 4xx does.
func Refuse(err error) error {
	if err == nil {
		err = errors.New("refused")
	}
	return &refusal{err}
}

type refusal struct{ err error }

func (r *refusal) Error() string        { return "inbox: message refused: " + r.err.Error() }
func (r *refusal) Unwrap() []error      { return []error{ErrRefused, r.err} }
func (r *refusal) reason() string       { return r.err.Error() }
func (r *refusal) Is(target error) bool { return target == ErrRefused }

// maxReason bounds the refusal reason recorded with an id.
const maxReason = 1024

// refused returns the reason of a refusal, bounded, and whether err is one.
func refused(err error) (string, bool) {
	var r *refusal
	if !errors.As(err, &r) {
		return "", false
	}
	reason := r.reason()
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	return reason, true
}

// Event is what an Observer is told about each processed message.
type Event struct {
	Consumer string
	Outcome  Outcome
	Attempt  int
	Duration time.Duration
}
