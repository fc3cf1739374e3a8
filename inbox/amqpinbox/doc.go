// Package amqpinbox consumes a RabbitMQ queue through an inbox.Inbox, so
// that each message takes effect once however often it is delivered or
// published.
//
// A Consumer takes deliveries with manual acknowledgements, runs each
// through Inbox.Process with the user's inbox.Handler, and settles it only
// after the outcome is durable:
//
//	Applied, Duplicate   ack
//	Refused              ack (or reject to the dead-letter exchange, with Config.DeadLetterRefused)
//	Retry                nack with requeue, after a backoff that grows with the attempt
//	DeadLetter           reject without requeue (to the queue's dead-letter exchange, if it has one)
//
// A consumer killed between its commit and its ack leaves the message
// unacknowledged; RabbitMQ delivers it again when the connection closes,
// and the redelivery is a Duplicate, acknowledged without running anything.
//
// A handler that panics is taken for a failing one (the panic is logged
// with its stack and the transaction rolls back), so that a message that
// always panics is dead-lettered after MaxAttempts deliveries instead of
// crashing every consumer it reaches.
//
// The message id is the message_id property by default, or what
// Config.MessageID derives from the delivery (a business id in the body);
// a delivery without one is dead-lettered, since nothing could tell its
// redelivery from a new message.
//
// Consumer.Run dials the broker, declares what Config.Setup declares,
// consumes, and reconnects with backoff when the connection is lost
// (amqp091 does not reconnect by itself). Consumer.Consume consumes on a
// channel the caller owns, and Consumer.Handle settles one delivery, for
// callers with their own loop. Publish sends a message with its
// message_id set from an intent key and waits for the broker's publisher
// confirm, so a publish that failed or timed out can be retried with the
// same id.
//
// See docs/CONSUMERS.md for how to configure a dead-letter exchange and how
// the attempt count works on quorum and classic queues.
package amqpinbox
