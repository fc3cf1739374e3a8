// Package inbox applies each message of an at-least-once broker once: a
// transactional inbox.
//
// A consumer that crashes between its commit and its ack gets the message
// again, and producers retry publishes. The inbox records the message id
// in the same database transaction as the handler's effect, unique per
// (consumer name, id), through the same stores as idem's HTTP keys
// (pgstore, sqlitestore; memstore in tests):
//
//	ib, err := inbox.New(store, &inbox.Config{Name: "payments"})
//	…
//	outcome, err := ib.Process(ctx, &inbox.Message{ID: id, Body: body, Attempt: n},
//		func(ctx context.Context, m *inbox.Message) error {
//			tx, _ := pgstore.TxFrom(ctx) // the inbox's transaction
//			_, err := tx.Exec(ctx, `UPDATE accounts SET …`)
//			return err
//		})
//	if outcome.Settled() { ack } else if outcome == inbox.Retry { nak } else { dead-letter }
//
// # Guarantees
//
//   - A duplicate delivery (a redelivery, a republished message) runs
//     nothing, commits nothing, and is acknowledged (Duplicate).
//   - A handler error, a panic or a crash rolls everything back and records
//     nothing: the message is delivered again (Retry). An id is never
//     marked seen before its effect commits.
//   - A message that can never succeed is settled: the handler refuses it
//     with Refuse, nothing it wrote commits, the refusal is recorded with
//     the id, and the message is acknowledged (Refused), so its
//     redeliveries are Duplicates.
//   - A failure that persists is retried until Config.MaxAttempts (by the
//     broker's delivery count, Message.Attempt), then dead-lettered.
//   - Two concurrent deliveries of one id (to two replicas, say) never both
//     run: the second gets Retry at once, since the first may yet fail.
//   - An id reused with another body is dead-lettered with ErrConflict,
//     neither applied nor acknowledged as a duplicate.
//
// Process returns an Outcome that a broker adapter turns into ack
// (Applied, Duplicate, Refused), nak or requeue (Retry), or a dead letter
// (DeadLetter), after the commit and never before. The adapters are
// natsinbox (NATS JetStream) and amqpinbox (RabbitMQ); any other broker
// needs only the same mapping.
//
// # Ids and expiry
//
// Message.ID is whatever the adapter derived: the broker's message id by
// default, or the result of a function of the message (a business id in
// the body). Any string works (see Key). Records expire after Config.TTL
// (7 days by default): a duplicate arriving later runs again. idem.Sweeper
// deletes expired records, inbox and HTTP alike, from the shared table.
//
// docs/CONSUMERS.md explains the choices and how to run a consumer; the
// package inboxtest is the conformance suite the inbox passes on every
// store.
package inbox
