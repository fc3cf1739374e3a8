package batch

import (
	"errors"
	"fmt"
	"time"
)

// Config configures one run of a batch. BatchID and Scope are required.
type Config struct {
	// BatchID names the batch: every run of the same batch must give the
	// same one. Any non-empty string; it is part of each item's key (see
	// Key). Required.
	BatchID string

	// Scope is the scope of the items' keys (idem.Request.Scope). Give
	// every kind of batch a scope of its own that no other caller of the
	// same store uses (an HTTP principal, an inbox), so that no other key
	// can ever stand for an item's. Required.
	Scope string

	// Concurrency is how many items run at once. Items are started in
	// order; with more than one, they may end in another order. Defaults
	// to 1.
	Concurrency int

	// TTL is how long each item's record is kept (idem.Request.TTL). A
	// re-run after the records expired runs the items again. Defaults to
	// the guard's TTL.
	TTL time.Duration

	// InFlightWait is how long an item whose key another call holds (the
	// same batch running elsewhere, or the same id twice in this one) is
	// tried again before it is reported Failed. Defaults to 30 seconds.
	InFlightWait time.Duration

	// Progress, when set, is called after each item ends, with the counts
	// so far. Calls are made one at a time, from Run's goroutines; Run
	// waits for each before going on, so it should be quick. Defaults to
	// none.
	Progress func(Progress)
}

// DefaultInFlightWait is the default Config.InFlightWait.
const DefaultInFlightWait = 30 * time.Second

func (c *Config) withDefaults() (Config, error) {
	if c == nil {
		return Config{}, errors.New("batch: Config is nil; BatchID and Scope are required")
	}
	out := *c
	switch {
	case out.BatchID == "":
		return out, errors.New("batch: Config.BatchID is required")
	case out.Scope == "":
		return out, errors.New("batch: Config.Scope is required")
	case out.Concurrency < 0:
		return out, fmt.Errorf("batch: Config.Concurrency must not be negative, got %d", out.Concurrency)
	case out.TTL < 0:
		return out, fmt.Errorf("batch: Config.TTL must not be negative, got %s", out.TTL)
	case out.InFlightWait < 0:
		return out, fmt.Errorf("batch: Config.InFlightWait must not be negative, got %s", out.InFlightWait)
	}
	if out.Concurrency == 0 {
		out.Concurrency = 1
	}
	if out.InFlightWait == 0 {
		out.InFlightWait = DefaultInFlightWait
	}
	return out, nil
}
