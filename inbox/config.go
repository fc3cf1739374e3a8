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
	// Name names the consumer. A message id takes effect once per name:
	// two consumers with different names that read the same messages
	// each apply them once. Required.
	Name string

	// TTL is how long a processed id is remembered. A redelivery or a
	// republished duplicate arriving later than that runs again, so it
	// must be longer than the longest a broker may hold a message plus
	// the longest a producer may retry a publish. Defaults to 7 days.
	TTL time.Duration

	// MaxAttempts is how many deliveries of a message whose handler keeps
	// failing are tried before it is dead-lettered, when the broker says
	// which delivery it is (Message.Attempt). Defaults to 5.
	MaxAttempts int

	// Logger receives one line per message at Debug (applied, duplicate),
	// Info (refused, retry) or Error (dead letter). Defaults to none.
	Logger *slog.Logger

	// Observer is told the outcome of every message, for metrics.
	// Defaults to none.
	Observer func(Event)

	// Now returns the current time. Tests inject a clock here. Defaults to
	// time.Now.
	Now func() time.Time
}

// Defaults.
const (
	DefaultTTL         = 7 * 24 * time.Hour
	DefaultMaxAttempts = 5
)

func (c *Config) withDefaults() (Config, error) {
	if c == nil {
		return Config{}, errors.New("inbox: Config is required (Config.Name names the consumer)")
	}
	out := *c
	switch {
	case out.Name == "":
		return Config{}, errors.New("inbox: Config.Name is required")
	case len(out.Name) > 128:
		return Config{}, fmt.Errorf("inbox: Config.Name must be at most 128 bytes, got %d", len(out.Name))
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
