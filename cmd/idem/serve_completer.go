package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
)

// runCompleter runs a completer pass every interval, the first one
// interval after the start, until ctx is done, counting what each pass did
// in m. (Waiting first leaves the payouts a process left pending to their
// clients' retries for a while after a restart.)
func runCompleter(ctx context.Context, c *idem.Completer, interval time.Duration, m *completerMetrics, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := c.RunOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("idem serve: completer pass failed", "err", err)
			m.pass(false)
		case err == nil:
			m.pass(true)
		}
	}
}

// startCompleter runs the completer of l in the background and returns a
// function that stops it and waits for its pass to end.
func startCompleter(ctx context.Context, l *idem.Leased, interval, reportAfter time.Duration, m *completerMetrics, log *slog.Logger) (stop func(), err error) {
	c, err := idem.NewCompleter(l, &idem.CompleterConfig{ReportAfter: reportAfter, Logger: log, Observe: m.observe})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runCompleter(ctx, c, interval, m, log)
	}()
	return func() { cancel(); <-done }, nil
}
