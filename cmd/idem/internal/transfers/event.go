package transfers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/idemkit/idem/outbox"
)

// Event is what idem serve -publish announces of an applied transfer: the
// transfer as GET /transfers/{id} returns it, plus the event's id, which
// is also the message id (Nats-Msg-Id, AMQP message-id) it is published
// under. A consumer that records event ids through an inbox applies each
// transfer once, however often the relay republishes it.
type Event struct {
	Transfer
	EventID string `json:"event_id"`
}

// EventName is the type of a transfer's event. Its outbox message name is
// EventName, a slash and the transfer id (see EventID).
const EventName = "transfer.created"

// EventID returns the event id of the transfer id applied by the intent
// (scope, key): the outbox id of the intent and the message name
// "transfer.created/<id>". The transfer id is part of the name because a
// key is free again once its record expires or is forgotten: a request
// reusing it then applies a second transfer, whose event must not take
// the first one's id (the outbox would keep the first and drop it, and a
// consumer's inbox would take it for a duplicate).
func EventID(scope, key string, transferID int64) string {
	return outbox.ID(scope, key, eventMessageName(transferID))
}

func eventMessageName(transferID int64) string {
	return EventName + "/" + strconv.FormatInt(transferID, 10)
}

// stageEvent stages t's event through the transaction that applied it
// (ctx's: the key's of POST /transfers, the inbox's of a command, the
// batch row's of an import), so that the event commits with the transfer
// or not at all. Its id is EventID's: the transfer id, which the same
// transaction assigned, makes it the id of this application of the intent.
func stageEvent(ctx context.Context, t Transfer) error {
	st, err := outbox.StagerFrom(ctx)
	if err != nil {
		return fmt.Errorf("transfers: stage the event of transfer %d: %w", t.ID, err)
	}
	scope, key := st.OutboxIntent()
	body, err := json.Marshal(Event{Transfer: t, EventID: EventID(scope, key, t.ID)})
	if err != nil {
		return err
	}
	return outbox.Stage(ctx, outbox.Message{Name: eventMessageName(t.ID), Body: body})
}
