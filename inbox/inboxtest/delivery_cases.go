package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
)

func firstDeliveryApplies(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	handler, ran := e.handler("first", nil)
	if err := process(t, ib, msg("m-1", `{"n":1}`, 1), handler, inbox.Applied); err != nil {
		t.Errorf("Applied with error %v, want nil", err)
	}
	if !inbox.Applied.Settled() {
		t.Error("Applied is not Settled")
	}
	runs(t, ran, 1)
	e.effectsAre(t, "first", 1)
	if rec, ok := e.record(t, ib, "m-1"); ok && rec == nil {
		t.Error("no record of the applied id")
	}
}

func duplicateRunsNothingAndIsAcked(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	handler, ran := e.handler("dup", nil)
	process(t, ib, msg("m-1", "body", 1), handler, inbox.Applied)
	for attempt := 2; attempt <= 4; attempt++ {
		if err := process(t, ib, msg("m-1", "body", attempt), handler, inbox.Duplicate); err != nil {
			t.Errorf("Duplicate with error %v, want nil", err)
		}
	}
	// A republished copy (a new delivery, attempt 1 again) is one too.
	process(t, ib, msg("m-1", "body", 1), handler, inbox.Duplicate)
	if !inbox.Duplicate.Settled() {
		t.Error("Duplicate is not Settled")
	}
	runs(t, ran, 1)
	e.effectsAre(t, "dup", 1)
}

var errTransient = errors.New("inboxtest: transient failure")

func handlerErrorRollsBackThenSucceeds(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	fail := true
	handler, ran := e.handler("flaky", func(context.Context, *inbox.Message) error {
		if fail {
			return errTransient
		}
		return nil
	})
	err := process(t, ib, msg("m-1", "body", 1), handler, inbox.Retry)
	if !errors.Is(err, errTransient) {
		t.Errorf("Retry error = %v, want the handler's", err)
	}
	if inbox.Retry.Settled() {
		t.Error("Retry is Settled")
	}
	e.effectsAre(t, "flaky", 0)
	e.assertNoRecord(t, ib, "m-1")

	fail = false
	process(t, ib, msg("m-1", "body", 2), handler, inbox.Applied)
	process(t, ib, msg("m-1", "body", 3), handler, inbox.Duplicate)
	runs(t, ran, 2)
	e.effectsAre(t, "flaky", 1)
}

func panicRollsBackAndIsRetried(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	handler, _ := e.handler("panicky", func(context.Context, *inbox.Message) error {
		panic("inboxtest: handler bug")
	})
	err := process(t, ib, msg("m-1", "body", 1), handler, inbox.Retry)
	if err == nil || !strings.Contains(err.Error(), "handler bug") {
		t.Errorf("error = %v, want one naming the panic", err)
	}
	e.effectsAre(t, "panicky", 0)
	e.assertNoRecord(t, ib, "m-1")
	ok, ran := e.handler("panicky", nil)
	process(t, ib, msg("m-1", "body", 2), ok, inbox.Applied)
	runs(t, ran, 1)
	e.effectsAre(t, "panicky", 1)
}

var errBusiness = errors.New("inboxtest: insufficient funds")

func refusalIsSettledAndCommitsNothing(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", &inbox.Config{MaxAttempts: 2})
	// The handler writes before it refuses: none of it may commit.
	handler, ran := e.handler("refused", func(context.Context, *inbox.Message) error {
		return inbox.Refuse(errBusiness)
	})
	err := process(t, ib, msg("m-1", "body", 1), handler, inbox.Refused)
	if !errors.Is(err, inbox.ErrRefused) || !errors.Is(err, errBusiness) {
		t.Errorf("Refused error = %v, want one matching ErrRefused and the handler's cause", err)
	}
	if !inbox.Refused.Settled() {
		t.Error("Refused is not Settled")
	}
	e.effectsAre(t, "refused", 0)
	if rec, ok := e.record(t, ib, "m-1"); ok && rec == nil {
		t.Error("no record of the refused id")
	}
	for attempt := 2; attempt <= 3; attempt++ {
		process(t, ib, msg("m-1", "body", attempt), handler, inbox.Duplicate)
	}
	runs(t, ran, 1)
	e.effectsAre(t, "refused", 0)

	// A refusal is final whatever the attempt: never a dead letter.
	process(t, ib, msg("m-2", "body", 9), handler, inbox.Refused)
	// Refuse(nil) refuses too.
	nilRefusal, _ := e.handler("refused", func(context.Context, *inbox.Message) error { return inbox.Refuse(nil) })
	process(t, ib, msg("m-3", "body", 1), nilRefusal, inbox.Refused)
	// A refusal wrapped by the handler is still one.
	wrapped, _ := e.handler("refused", func(context.Context, *inbox.Message) error {
		return errors.Join(errors.New("context"), inbox.Refuse(errBusiness))
	})
	process(t, ib, msg("m-4", "body", 1), wrapped, inbox.Refused)
	e.effectsAre(t, "refused", 0)
}

func persistentFailureIsDeadLetteredAtMaxAttempts(t testing.TB, h *Harness) {
	e := setup(t, h)
	var mu sync.Mutex
	var events []inbox.Event
	ib := e.inbox(t, "c", &inbox.Config{Observer: func(ev inbox.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	}})
	if n := ib.MaxAttempts(); n != 5 {
		t.Errorf("MaxAttempts() = %d, want the default 5", n)
	}
	handler, ran := e.handler("failing", func(context.Context, *inbox.Message) error { return errTransient })
	for attempt := 1; attempt < 5; attempt++ {
		if err := process(t, ib, msg("m-1", "body", attempt), handler, inbox.Retry); !errors.Is(err, errTransient) {
			t.Errorf("attempt %d: error %v, want the handler's", attempt, err)
		}
	}
	err := process(t, ib, msg("m-1", "body", 5), handler, inbox.DeadLetter)
	if !errors.Is(err, errTransient) {
		t.Errorf("dead letter error = %v, want the handler's", err)
	}
	if inbox.DeadLetter.Settled() {
		t.Error("DeadLetter is Settled")
	}
	runs(t, ran, 5)
	e.effectsAre(t, "failing", 0)
	e.assertNoRecord(t, ib, "m-1")
	mu.Lock()
	if len(events) != 5 || events[4].Attempt != 5 || events[4].Outcome != inbox.DeadLetter {
		t.Errorf("events = %+v, want 5 with the last at attempt 5, dead_letter", events)
	}
	mu.Unlock()

	// Beyond MaxAttempts (a broker that delivers again): still a dead letter.
	process(t, ib, msg("m-1", "body", 6), handler, inbox.DeadLetter)
	// Nothing was recorded: once the cause is fixed, a re-driven message runs.
	fixed, fixedRan := e.handler("failing", nil)
	process(t, ib, msg("m-1", "body", 1), fixed, inbox.Applied)
	runs(t, fixedRan, 1)
	e.effectsAre(t, "failing", 1)

	// A broker that does not count deliveries: retried, never dead-lettered.
	for range 8 {
		process(t, ib, msg("m-2", "body", 0), handler, inbox.Retry)
	}
	// A configured bound.
	ib3 := e.inbox(t, "c3", &inbox.Config{MaxAttempts: 2})
	process(t, ib3, msg("m-3", "body", 1), handler, inbox.Retry)
	process(t, ib3, msg("m-3", "body", 2), handler, inbox.DeadLetter)
	// The handler's error counts even when it wraps one of idem's own
	// (a handler that runs a Guard of its own).
	for _, cause := range []error{idem.ErrUnavailable, &idem.InFlightError{}} {
		wrapping, _ := e.handler("failing", func(context.Context, *inbox.Message) error {
			return fmt.Errorf("downstream: %w", cause)
		})
		process(t, ib3, msg("m-4", "body", 2), wrapping, inbox.DeadLetter)
	}
	e.effectsAre(t, "failing", 1)
}

func reusedIDWithAnotherBodyIsDeadLettered(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	handler, ran := e.handler("reused", nil)
	process(t, ib, msg("m-1", `{"amount":1}`, 1), handler, inbox.Applied)
	err := process(t, ib, msg("m-1", `{"amount":1000}`, 1), handler, inbox.DeadLetter)
	if !errors.Is(err, inbox.ErrConflict) {
		t.Errorf("error = %v, want ErrConflict", err)
	}
	// The original body is still a duplicate.
	process(t, ib, msg("m-1", `{"amount":1}`, 2), handler, inbox.Duplicate)
	runs(t, ran, 1)
	e.effectsAre(t, "reused", 1)

	// Likewise for a refused id.
	refuse, _ := e.handler("reused", func(context.Context, *inbox.Message) error { return inbox.Refuse(errBusiness) })
	process(t, ib, msg("m-2", "a", 1), refuse, inbox.Refused)
	if err := process(t, ib, msg("m-2", "b", 1), handler, inbox.DeadLetter); !errors.Is(err, inbox.ErrConflict) {
		t.Errorf("refused id with another body: error = %v, want ErrConflict", err)
	}
	runs(t, ran, 1)
	e.effectsAre(t, "reused", 1)
}

func messageWithoutIDIsDeadLettered(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	handler, ran := e.handler("noid", nil)
	if err := process(t, ib, msg("", "body", 1), handler, inbox.DeadLetter); !errors.Is(err, inbox.ErrNoID) {
		t.Errorf("error = %v, want ErrNoID", err)
	}
	got, err := ib.Process(context.Background(), nil, handler)
	if got != inbox.DeadLetter || !errors.Is(err, inbox.ErrNoID) {
		t.Errorf("Process(nil message) = %s, %v; want dead_letter, ErrNoID", got, err)
	}
	runs(t, ran, 0)
	e.effectsAre(t, "noid", 0)
}

func anyIDTakesEffectOnce(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	long := strings.Repeat("L", 300)
	ids := []string{
		"plain-1",
		"with space",
		"ünï-cödé",
		strings.Repeat("x", 255), // the longest valid key
		strings.Repeat("x", 256), // one more: stored as a digest
		long,
		inbox.Key(long), // another id's digest, as an id of its own
		"sha256:abc",
		"nul\x00and\xffbytes",
		"line\nbreak",
	}
	for i, id := range ids {
		name := "id-" + string(rune('a'+i))
		handler, ran := e.handler(name, nil)
		process(t, ib, msg(id, "body", 1), handler, inbox.Applied)
		process(t, ib, msg(id, "body", 2), handler, inbox.Duplicate)
		runs(t, ran, 1)
		e.effectsAre(t, name, 1)
	}
	for _, id := range ids {
		if err := checkKey(inbox.Key(id)); err != nil {
			t.Errorf("Key(%q) = %q: %v", id, inbox.Key(id), err)
		}
	}
}

// checkKey reports whether k is a valid idempotency key.
func checkKey(k string) error {
	if k == "" || len(k) > 255 {
		return errors.New("not 1 to 255 characters")
	}
	for i := range len(k) {
		if k[i] < 0x21 || k[i] > 0x7e {
			return errors.New("not visible ASCII")
		}
	}
	return nil
}

func consumersAreIndependent(t testing.TB, h *Harness) {
	e := setup(t, h)
	a, b := e.inbox(t, "ledger", nil), e.inbox(t, "notifier", nil)
	handler, ran := e.handler("both", nil)
	process(t, a, msg("m-1", "body", 1), handler, inbox.Applied)
	process(t, b, msg("m-1", "body", 1), handler, inbox.Applied)
	process(t, a, msg("m-1", "body", 2), handler, inbox.Duplicate)
	process(t, b, msg("m-1", "body", 2), handler, inbox.Duplicate)
	// Two inboxes of one name share their ids (replicas of one service).
	a2 := e.inbox(t, "ledger", nil)
	process(t, a2, msg("m-1", "body", 3), handler, inbox.Duplicate)
	runs(t, ran, 2)
	e.effectsAre(t, "both", 2)
}

func commitsWhenCallerGivesUpAfterHandler(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handler, ran := e.handler("late", func(context.Context, *inbox.Message) error {
		cancel() // the consumer is shutting down as the handler returns
		return nil
	})
	got, err := ib.Process(ctx, msg("m-1", "body", 1), handler)
	if got != inbox.Applied || err != nil {
		t.Errorf("Process = %s, %v; want applied", got, err)
	}
	process(t, ib, msg("m-1", "body", 2), handler, inbox.Duplicate)
	runs(t, ran, 1)
	e.effectsAre(t, "late", 1)
}

func observerSeesEveryOutcome(t testing.TB, h *Harness) {
	e := setup(t, h)
	var events []inbox.Event
	ib := e.inbox(t, "observed", &inbox.Config{MaxAttempts: 2, Observer: func(ev inbox.Event) { events = append(events, ev) }})
	ok, _ := e.handler("obs", nil)
	refuse, _ := e.handler("obs", func(context.Context, *inbox.Message) error { return inbox.Refuse(errBusiness) })
	fail, _ := e.handler("obs", func(context.Context, *inbox.Message) error { return errTransient })
	process(t, ib, msg("a", "body", 1), ok, inbox.Applied)
	process(t, ib, msg("a", "body", 2), ok, inbox.Duplicate)
	process(t, ib, msg("r", "body", 1), refuse, inbox.Refused)
	process(t, ib, msg("f", "body", 1), fail, inbox.Retry)
	process(t, ib, msg("f", "body", 2), fail, inbox.DeadLetter)
	want := []struct {
		id      string
		outcome inbox.Outcome
		attempt int
		err     bool
	}{
		{"a", inbox.Applied, 1, false},
		{"a", inbox.Duplicate, 2, false},
		{"r", inbox.Refused, 1, true},
		{"f", inbox.Retry, 1, true},
		{"f", inbox.DeadLetter, 2, true},
	}
	if len(events) != len(want) {
		t.Fatalf("got %d events, want %d: %+v", len(events), len(want), events)
	}
	for i, w := range want {
		ev := events[i]
		if ev.Consumer != "observed" || ev.MessageID != w.id || ev.Outcome != w.outcome || ev.Attempt != w.attempt || (ev.Err != nil) != w.err || ev.Duration < 0 {
			t.Errorf("event %d = %+v, want consumer observed, id %q, %s, attempt %d, error %v", i, ev, w.id, w.outcome, w.attempt, w.err)
		}
	}
	if got := inbox.Outcomes(); len(got) != 5 {
		t.Errorf("Outcomes() = %v, want the 5 outcomes", got)
	}
}
