package idem

import (
	"fmt"
	"time"
)

// Config configures a Guard. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// TTL is how long a record is kept and replayed after it is written.
	// It must be longer than the longest realistic retry window of the
	// clients. A Request may override it. Defaults to 24 hours.
	TTL time.Duration

	// InFlightRetryAfter is the retry hint carried by an *InFlightError.
	// Defaults to 1 second.
	InFlightRetryAfter time.Duration

	// Now returns the current time. Tests inject a clock here. Defaults to
	// time.Now.
	Now func() time.Time
}

// DefaultTTL is the default record lifetime.
const DefaultTTL = 24 * time.Hour

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.TTL < 0 {
		return out, fmt.Errorf("idem: Config.TTL must not be negative, got %s", out.TTL)
	}
	if out.InFlightRetryAfter < 0 {
		return out, fmt.Errorf("idem: Config.InFlightRetryAfter must not be negative, got %s", out.InFlightRetryAfter)
	}
	if out.TTL == 0 {
		out.TTL = DefaultTTL
	}
	if out.InFlightRetryAfter == 0 {
		out.InFlightRetryAfter = time.Second
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out, nil
}
