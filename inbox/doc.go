// Package inbox applies each message of an at-least-once broker once: a
// transactional inbox.
//
// A consumer that crashes between its commit and its ack gets the message
// again, and producers retry publishes. The inbox records the message id in
// the same database transaction as the handler's effect, unique per
// (consumer name, id), through the same stores as idem's HTTP keys
// (pgstore, sqlitestore). So a duplicate delivery runs nothing and commits
// nothing; a handler error or a crash rolls back and the message is
// delivered again; an id is never marked seen before its effect commits.
//
// Process returns an Outcome that a broker adapter turns into ack
// (Applied, Duplicate, Refused), nak or requeue (Retry), or a dead letter
// (DeadLetter). The adapters are natsinbox (NATS JetStream) and amqpinbox
// (RabbitMQ); any other broker needs only the same mapping.
//
// Records expire after Config.TTL (7 days by default) and idem.Sweeper
// deletes them with the HTTP records. See docs/CONSUMERS.md.
package inbox
