package transfers

import (
	"context"
	"encoding/json"
	"fmt"

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

// EventName is the outbox message name of a transfer's event: with the
// scope and key of the intent that applied the transfer, it derives the
// event id.
const EventName = "transfer.created"

// stageEvent stages t's event through the transaction that applied it
// (ctx's: the key's of POST /transfers, the inbox's of a command, the
// batch row's of an import), so that the event commits with the transfer
// or not at all. Its id is the outbox id of the intent and EventName: a
// re-execution of the intent stages the same id, which the outbox keeps
// once.
func stageEvent(ctx context.Context, t Transfer) error {
	st, err := outbox.StagerFrom(ctx)
	if err != nil {
		return fmt.Errorf("transfers: stage the event of transfer %d: %w", t.ID, err)
	}
	scope, key := st.OutboxIntent()
	body, err := json.Marshal(Event{Transfer: t, EventID: outbox.ID(scope, key, EventName)})
	if err != nil {
		return err
	}
	return outbox.Stage(ctx, outbox.Message{Name: EventName, Body: body})
}
