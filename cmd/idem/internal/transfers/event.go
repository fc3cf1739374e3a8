package transfers

// Event is what idem serve -publish announces of an applied transfer: the
// transfer as GET /transfers/{id} returns it, plus the event's id, which
// is also the message id (Nats-Msg-Id, AMQP message-id) it is published
// under. A consumer that records event ids through an inbox applies each
// transfer once, however often the relay republishes it.
type Event struct {
	Transfer
	EventID string `json:"event_id"`
}

// EventName is the outbox message name of a transfer's event: with the
// scope and key of the intent that applied the transfer, it derives the
// event id.
const EventName = "transfer.created"
