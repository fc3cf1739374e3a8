// Package natsinbox consumes NATS JetStream messages through an inbox, so
// that each message's effect commits once however often it is delivered.
//
// Consume receives a consumer's messages and runs each through
// inbox.Inbox.Process with the user's inbox.Handler, which applies the
// effect in the store's transaction; the message id (its Nats-Msg-Id by
// default) commits in that same transaction. Then, and only then, the
// message is settled:
//
//	Applied, Duplicate, Refused  ack (Config.DoubleAck waits for the server's confirmation)
//	Retry                        nak with a delay (Config.Backoff from the delivery count)
//	DeadLetter                   term, after an optional copy (Config.DeadLetter, RepublishTo)
//
// A consumer that dies between its commit and its ack gets the message
// again after the consumer's AckWait, and the inbox answers Duplicate: it
// is acked, nothing runs twice. While a handler runs, the server is told
// the message is in progress, so that a slow handler does not see its
// message delivered to another consumer meanwhile.
//
// Handle does the same for one message, for users with their own loop.
// Publish sets Nats-Msg-Id from an intent key, so that the stream's
// duplicate window drops a producer's retries before any consumer sees
// them; the inbox catches what the window cannot: redeliveries, and copies
// published after the window closed, for as long as the inbox keeps ids
// (inbox.Config.TTL). See docs/CONSUMERS.md.
package natsinbox
