// Package testclock is the settable clock that this module's tests and
// conformance suites inject where a Config takes a Now function.
package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to. It is safe for concurrent
// use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock set to a fixed instant, 2026-01-02 03:04:05 UTC.
func New() *Clock {
	return &Clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (backwards when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
