package inbox

import "context"

// Message is one delivery of a message, as a broker adapter hands it over.
type Message struct {
	// ID names the message: two deliveries with one ID are one message,
	// which takes effect once. It is what the adapter derived: the
	// broker's message id by default (NATS's Nats-Msg-Id header, AMQP's
	// message_id property), or the result of a function of the message
	// the user gave the adapter (a business id in the body, for producers
	// that set no id). Any string of bytes; see Key. Required.
	ID string

	// Body is the message's payload. Its SHA-256 is recorded with the id,
	// so that an id reused with another body is told apart from a
	// redelivery (see ErrConflict).
	Body []byte

	// Header holds the message's headers, if the broker has any.
	Header map[string][]string

	// Attempt is the delivery count, this delivery included: 1 for the
	// first delivery, 0 when the broker does not say. Config.MaxAttempts
	// applies only when it is known.
	Attempt int

	// Raw is the broker's own message (a jetstream.Msg, an
	// amqp091.Delivery), for handlers that ask for it. The handler must
	// not acknowledge it: the adapter does, after the commit.
	Raw any
}

// Handler applies one message's effect through the store's transaction
// that ctx carries (reach it with the store package's TxFrom, as in work
// passed to idem.Guard.Do). It returns nil when the effect is done; an
// error made with Refuse when the message can never succeed (malformed, or
// refused by the business rules); and any other error to have the message
// delivered again. It must write only through that transaction: what it
// writes elsewhere is not undone when the transaction rolls back.
type Handler func(ctx context.Context, m *Message) error
