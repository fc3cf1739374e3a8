package conformance

import "sync/atomic"

// Counter counts what a case counts (the runs of a work, of a handler),
// from any goroutine. The zero value is ready.
type Counter struct{ n atomic.Int64 }

// Add counts one more and returns the count.
func (c *Counter) Add() int { return int(c.n.Add(1)) }

// Get returns the count.
func (c *Counter) Get() int { return int(c.n.Load()) }
