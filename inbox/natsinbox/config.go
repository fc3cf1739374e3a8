package natsinbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/nats-io/nats.go/jetstream"
)

// Config configures Consume and Handle. A nil Config, or the zero value of
// a field, means its default.
type Config struct {
	// MessageID returns a message's id, for messages whose producer puts
	// it elsewhere than Nats-Msg-Id (a business id in the body, say). An
	// error or an empty id dead-letters the message. Defaults to the
	// Nats-Msg-Id header (see FallbackToSequence).
	MessageID func(jetstream.Msg) (string, error)

	// FallbackToSequence names a message that has no Nats-Msg-Id header by
	// its stream and stream sequence ("ORDERS:42") instead of
	// dead-lettering it. Such an id catches redeliveries but not a
	// producer's retry (a republished message has a new sequence), and a
	// stream deleted and created again under the same name numbers its
	// messages from 1 again: give the inbox a new name then. It applies to
	// the default id only: setting it with MessageID is an error.
	// Defaults to false.
	FallbackToSequence bool

	// Backoff returns how long the server waits before delivering a
	// message again after its handler failed on delivery number attempt
	// (1 for the first). Defaults to DefaultBackoff.
	Backoff func(attempt int) time.Duration

	// DoubleAck has each acknowledgement confirmed by the server
	// (jetstream.Msg.DoubleAck), so that Handle reports an ack that was
	// lost, at the cost of a round trip per message. Either way a lost ack
	// only means a redelivery, which the inbox answers Duplicate. Defaults
	// to false.
	DoubleAck bool

	// InProgressEvery is how often the server is told, while a handler
	// runs, that its message is still being worked on, so that the
	// consumer's AckWait does not run out under a slow handler and the
	// message is not delivered to another consumer meanwhile. Defaults,
	// in Consume, to a third of the consumer's AckWait, and, in Handle, to
	// 10 s (a third of JetStream's default AckWait, 30 s).
	InProgressEvery time.Duration

	// DeadLetter, when set, receives each message that the inbox
	// dead-letters, with the reason, before the message is terminated.
	// When it fails, the message is not terminated: it is delivered again
	// after Backoff, and dead-lettered again. RepublishTo makes one that
	// copies the message to a subject. Defaults to none: the message is
	// terminated and the reason is logged by the inbox (its
	// Config.Logger, at Error) and returned by Handle.
	DeadLetter func(ctx context.Context, msg jetstream.Msg, reason error) error

	// Prefetch is how many messages Consume asks the server for ahead of
	// the handler (jetstream.PullMaxMessages). The consumer's AckWait runs
	// from delivery, so Prefetch times a handler's duration must stay well
	// under AckWait, or buffered messages are delivered again meanwhile.
	// Defaults to 16.
	Prefetch int

	// PullExpiry is how long each pull request waits at the server for
	// messages before the client asks again, and PullHeartbeat how often
	// the server reports that it still holds the request. The client gives
	// up on a request after two missed heartbeats, so when the node that
	// holds it dies (a cluster losing the consumer's leader), consumption
	// resumes within about twice PullHeartbeat of the new leader, not
	// after jetstream's 30 s default expiry. PullHeartbeat must be under
	// half of PullExpiry. Default to 5 seconds and 1 second.
	PullExpiry    time.Duration
	PullHeartbeat time.Duration

	// Logger receives what Consume cannot return: failed acks, and
	// consumption errors such as a lost server (Warn). The inbox logs the
	// messages' outcomes itself. Defaults to none.
	Logger *slog.Logger

	// afterProcess, in tests, runs between Process and the ack.
	afterProcess func(inbox.Outcome)

	// shutdownNak, set by Consume, takes the messages to nak once the
	// subscription is gone.
	shutdownNak func(jetstream.Msg)
}

// Defaults.
const (
	DefaultPrefetch        = 16
	DefaultInProgressEvery = 10 * time.Second
	DefaultPullExpiry      = 5 * time.Second
	DefaultPullHeartbeat   = time.Second
)

// DefaultBackoff waits 1 s after a first failed delivery and twice as long
// after each further one, at most a minute.
func DefaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 7 {
		return time.Minute
	}
	return min(time.Second<<(attempt-1), time.Minute)
}

// ackTimeout bounds a DoubleAck and a dead-letter republish once the
// consumer's context has ended: the effect has committed, and its ack is
// still worth sending.
const ackTimeout = 5 * time.Second

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	switch {
	case out.InProgressEvery < 0:
		return Config{}, fmt.Errorf("natsinbox: Config.InProgressEvery must not be negative, got %s", out.InProgressEvery)
	case out.Prefetch < 0:
		return Config{}, fmt.Errorf("natsinbox: Config.Prefetch must not be negative, got %d", out.Prefetch)
	case out.PullExpiry < 0 || out.PullHeartbeat < 0:
		return Config{}, fmt.Errorf("natsinbox: Config.PullExpiry and PullHeartbeat must not be negative, got %s and %s", out.PullExpiry, out.PullHeartbeat)
	case out.MessageID != nil && out.FallbackToSequence:
		return Config{}, fmt.Errorf("natsinbox: Config.FallbackToSequence applies to the Nats-Msg-Id header, not to Config.MessageID; set one of them")
	}
	if out.Backoff == nil {
		out.Backoff = DefaultBackoff
	}
	if out.Prefetch == 0 {
		out.Prefetch = DefaultPrefetch
	}
	if out.PullExpiry == 0 {
		out.PullExpiry = DefaultPullExpiry
	}
	if out.PullHeartbeat == 0 {
		out.PullHeartbeat = DefaultPullHeartbeat
	}
	if out.PullHeartbeat*2 > out.PullExpiry {
		return Config{}, fmt.Errorf("natsinbox: Config.PullHeartbeat (%s) must be at most half of PullExpiry (%s)", out.PullHeartbeat, out.PullExpiry)
	}
	return out, nil
}
