package inbox

import "time"

// Outcome is what Process did with a message, and so what a broker adapter
// does with it: Applied, Duplicate and Refused are acknowledged (Settled);
// Retry is delivered again (nak, requeue), after a backoff; DeadLetter is
// taken out of the flow (terminated, or rejected to a dead-letter
// exchange). Its values are stable: they are used as metric labels.
type Outcome string

// Outcomes of Process.
const (
	// Applied: the handler ran and its effect committed with the id.
	Applied Outcome = "applied"

	// Duplicate: the id had already taken effect, or been refused, for
	// this consumer; the handler did not run and nothing was committed.
	Duplicate Outcome = "duplicate"

	// Refused: the handler refused the message for good (see Refuse).
	// Nothing it wrote was committed; the refusal alone is recorded with
	// the id, so that a redelivery is a Duplicate. An adapter may send a
	// refused message to a dead-letter destination rather than ack it:
	// either way it is settled and never delivered again.
	Refused Outcome = "refused"

	// Retry: the handler or the store failed, or another consumer is
	// processing the same id right now; nothing was committed, and the
	// message must be delivered again.
	Retry Outcome = "retry"

	// DeadLetter: the message cannot be processed: it has no id, its
	// handler failed on attempt Config.MaxAttempts, or its id already
	// took effect with another body. Nothing was committed, so the
	// message runs if it is ever delivered again (re-driven from a
	// dead-letter queue once the cause is fixed, say).
	DeadLetter Outcome = "dead_letter"
)

// Outcomes returns every Outcome, for metrics that pre-declare their labels.
func Outcomes() []Outcome { return []Outcome{Applied, Duplicate, Refused, Retry, DeadLetter} }

// Settled reports whether the broker should acknowledge the message: it
// has taken effect, was refused for good, or had already been processed.
func (o Outcome) Settled() bool { return o == Applied || o == Duplicate || o == Refused }

// Event is what an Observer is told about each processed message.
type Event struct {
	// Consumer is Config.Name.
	Consumer string
	// MessageID is Message.ID.
	MessageID string
	Outcome   Outcome
	// Attempt is Message.Attempt: 0 when the broker does not say.
	Attempt int
	// Duration is how long Process took, by Config.Now.
	Duration time.Duration
	// Err is the error Process returned with the outcome.
	Err error
}
