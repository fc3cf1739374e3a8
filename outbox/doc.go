// Package outbox is a transactional outbox: messages staged in the
// transaction that records an idempotency key, and relayed to a broker
// once that transaction has committed.
//
// Inside the work of idem.Guard.Do (an idemhttp handler, an inbox
// handler, a batch row) or a leased Run.LocalStep, Stage writes messages
// through the store's transaction:
//
//	err := outbox.Stage(ctx, outbox.Message{Name: "created", Subject: "transfers.created", Body: event})
//
// A rollback removes them with the effect; a commit makes the effect, the
// record and the messages visible together. Each message's id is
// ID(scope, key, name): a re-execution of the same intent stages the same
// id, and staging an id that is already there is a no-op.
//
// A Relay reads the committed messages of a Source (a store's outbox:
// pgstore's Store.Outbox, sqlitestore's Store.Outbox, sqldb's
// Store.Outbox), publishes each through a Publisher (natsoutbox,
// amqpoutbox, or your own) and marks it sent only once the broker has
// confirmed it. Delivery is at least once, with the same id on every
// publish; the broker's duplicate window and the consumer's inbox make it
// once. docs/OUTBOX.md states the guarantee, the order that holds, what
// is parked and what is swept.
//
// The package imports only the standard library and idem; the stores
// implement Stager and Source, the publishers Publisher.
package outbox
