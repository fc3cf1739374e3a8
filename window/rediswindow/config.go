package rediswindow

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config configures a Window. Name is required; every other zero field
// means its default.
type Config struct {
	// Name names the consumer whose ids the window keeps: its keys are
	// "idem:window:<Name>:<id>". Consumers that must not see each other's
	// ids take different names; the consumers of one queue share one.
	// It must not contain ':'. Required.
	Name string

	// Lease is how long a reservation holds its id unconfirmed: longer
	// than the handler takes, since past it another consumer may reserve
	// the id and run it too. At least a millisecond (Redis counts in
	// milliseconds: it is rounded up to whole ones). Defaults to 30 seconds.
	Lease time.Duration

	// Window is how long a confirmed id is remembered, counted from its
	// Confirm: a redelivery within it is dropped as a duplicate, one
	// after it is processed again. At least a millisecond (rounded up to
	// whole ones). Defaults to 5 minutes.
	Window time.Duration
}

const (
	defaultLease  = 30 * time.Second
	defaultWindow = 5 * time.Minute
)

// KeyPrefix starts every key of a window; the window's Name and ':'
// follow.
const KeyPrefix = "idem:window:"

func (c *Config) withDefaults() (Config, error) {
	if c == nil {
		return Config{}, errors.New("rediswindow: Config.Name is required")
	}
	v := *c
	switch {
	case v.Name == "":
		return v, errors.New("rediswindow: Config.Name is required")
	case strings.Contains(v.Name, ":"):
		return v, fmt.Errorf("rediswindow: Config.Name %q contains ':'", v.Name)
	case v.Lease < 0 || (v.Lease > 0 && v.Lease < time.Millisecond):
		return v, fmt.Errorf("rediswindow: Config.Lease is %v, want at least 1ms", v.Lease)
	case v.Window < 0 || (v.Window > 0 && v.Window < time.Millisecond):
		return v, fmt.Errorf("rediswindow: Config.Window is %v, want at least 1ms", v.Window)
	}
	if v.Lease == 0 {
		v.Lease = defaultLease
	}
	if v.Window == 0 {
		v.Window = defaultWindow
	}
	// Redis counts in milliseconds: round up, never down, so that no
	// lease or window is shorter than configured.
	v.Lease, v.Window = ceilMillis(v.Lease), ceilMillis(v.Window)
	return v, nil
}

func ceilMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
