package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/conformance"
)

func deliveryWhileAnotherHoldsTheIDIsRetried(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", &inbox.Config{MaxAttempts: 1})
	entered, release := make(chan struct{}), make(chan struct{})
	first, firstRan := e.handler("held", func(context.Context, *inbox.Message) error {
		close(entered)
		<-release
		return nil
	})
	done := make(chan inbox.Outcome, 1)
	go func() {
		o, err := ib.Process(context.Background(), msg("m-1", "body", 1), first)
		if err != nil {
			t.Errorf("first delivery: %v", err)
		}
		done <- o
	}()
	select {
	case <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the first delivery's handler did not start within 60s")
	}
	second, secondRan := e.handler("held", nil)
	// Even on its last attempt: in flight elsewhere is not a failure of
	// this message.
	err := process(t, ib, msg("m-1", "body", 1), second, inbox.Retry)
	if !errors.Is(err, idem.ErrInFlight) {
		t.Errorf("error = %v, want idem.ErrInFlight", err)
	}
	runs(t, secondRan, 0)
	close(release)
	if o := <-done; o != inbox.Applied {
		t.Errorf("first delivery = %s, want applied", o)
	}
	process(t, ib, msg("m-1", "body", 2), second, inbox.Duplicate)
	runs(t, firstRan, 1)
	runs(t, secondRan, 0)
	e.effectsAre(t, "held", 1)
}

func manyDeliveriesOfOneIDApplyOnce(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	const consumers = 16
	handler, ran := e.handler("storm", func(context.Context, *inbox.Message) error {
		time.Sleep(20 * time.Millisecond) // hold the id while the others arrive
		return nil
	})
	start := make(chan struct{})
	outcomes := make([]inbox.Outcome, consumers)
	var wg sync.WaitGroup
	for i := range consumers {
		wg.Go(func() {
			<-start
			deadline := time.Now().Add(60 * time.Second)
			for attempt := 1; ; attempt++ {
				o, err := ib.Process(context.Background(), msg("storm-1", "body", attempt), handler)
				if o.Settled() {
					outcomes[i] = o
					return
				}
				if o != inbox.Retry || time.Now().After(deadline) {
					t.Errorf("consumer %d: %s (%v) after %d attempts, want it settled", i, o, err, attempt)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	close(start)
	wg.Wait()
	count := map[inbox.Outcome]int{}
	for _, o := range outcomes {
		count[o]++
	}
	if count[inbox.Applied] != 1 || count[inbox.Duplicate] != consumers-1 {
		t.Errorf("outcomes %v, want 1 applied and %d duplicate", count, consumers-1)
	}
	runs(t, ran, 1)
	e.effectsAre(t, "storm", 1)

	// Many ids at once, each by several goroutines; one effect name per
	// id, since effects of different ids may commit concurrently.
	const ids = 8
	handlers := make([]inbox.Handler, ids)
	counters := make([]*conformance.Counter, ids)
	for i := range ids {
		handlers[i], counters[i] = e.handler(fmt.Sprint("storm-", i), nil)
	}
	var wg2 sync.WaitGroup
	for i := range ids * 3 {
		wg2.Go(func() {
			id := fmt.Sprint("many-", i%ids)
			for attempt := 1; attempt < 2000; attempt++ {
				o, err := ib.Process(context.Background(), msg(id, "body", attempt), handlers[i%ids])
				if o.Settled() {
					return
				}
				if o != inbox.Retry {
					t.Errorf("%s: %s (%v)", id, o, err)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Errorf("%s never settled", id)
		})
	}
	wg2.Wait()
	for i := range ids {
		runs(t, counters[i], 1)
		e.effectsAre(t, fmt.Sprint("storm-", i), 1)
	}
}
