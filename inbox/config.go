package inbox

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures an Inbox. Name is required; every other field's zero
// value means its default.
type Config struct {
	// Name names the consumer, at most 128 bytes. A message id takes
	// effect once per name: two consumers with different names that read
	// the same messages each apply them once; consumers that share a
	// name (replicas of one service) apply each id once between them.
	// Required.
	Name string

	// TTL is how long a processed id is remembered. A redelivery or a
	// republished duplicate arriving later than that runs again, so it
	// must be longer than the longest a broker may hold a message plus
	// the longest a producer may retry a publish. Defaults to 7 days.
	TTL time.Duration

	// MaxAttempts bounds the deliveries of a message whose handler keeps
	// failing: a handler failure on a delivery numbered MaxAttempts or
	// more (Message.Attempt, the broker's count) is dead-lettered rather
	// than retried, so the handler runs at most MaxAttempts times. A
	// delivery turned back before the handler ran (the store was
	// unavailable, another consumer held the id) is retried whatever its
	// number, but the broker counts it. With Attempt 0 (the broker does
	// not count) nothing is dead-lettered for failing. Defaults to 5.
	MaxAttempts int

	// Logger receives one line per message: at Debug for Applied and
	// Duplicate, Info for Refused and Retry, Error for DeadLetter and for
	// a handler that panicked. A line names the message by key_sha256,
	// idem.KeyHash of its key (Key of its id), never by its id, which may
	// be a client's idempotency key; the error it carries has the id
	// replaced by that digest. Event.MessageID has the id as it is.
	// Defaults to none.
	Logger *slog.Logger

	// Observer is told the outcome of every message, for metrics. It is
	// called on the goroutine that called Process, after the outcome is
	// final. Defaults to none.
	Observer func(Event)

	// Now returns the current time, which decides expiry. Tests inject a
	// clock here. Defaults to time.Now.
	Now func() time.Time

	// ReplayCacheBytes and DisableLocalInFlight are those of the
	// idem.Config of the inbox's Guard: a redelivery of an id this inbox
	// recently settled is answered Duplicate from memory, and a delivery of
	// an id it is processing is turned back at once, without a store call
	// (docs/DESIGN.md#in-process). The conformance suite turns both off, so
	// that every delivery reaches the store. Default to the Guard's
	// defaults (on).
	ReplayCacheBytes     int64
	DisableLocalInFlight bool
}

// Defaults of Config.
const (
	DefaultTTL         = 7 * 24 * time.Hour
	DefaultMaxAttempts = 5
)

// maxName bounds Config.Name, in bytes.
const maxName = 128

func (c *Config) withDefaults() (Config, error) {
	if c == nil {
		return Config{}, errors.New("inbox: Config is required (Config.Name names the consumer)")
	}
	out := *c
	switch {
	case out.Name == "":
		return Config{}, errors.New("inbox: Config.Name is required")
	case len(out.Name) > maxName:
		return Config{}, fmt.Errorf("inbox: Config.Name must be at most %d bytes, got %d", maxName, len(out.Name))
	case out.TTL < 0:
		return Config{}, fmt.Errorf("inbox: Config.TTL must not be negative, got %s", out.TTL)
	case out.MaxAttempts < 0:
		return Config{}, fmt.Errorf("inbox: Config.MaxAttempts must not be negative, got %d", out.MaxAttempts)
	}
	if out.TTL == 0 {
		out.TTL = DefaultTTL
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out, nil
}
