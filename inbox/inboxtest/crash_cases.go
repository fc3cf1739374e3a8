package inboxtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/crashchild"
)

const (
	crashModeEnv     = "IDEM_INBOXTEST_CRASH_MODE"
	crashLocationEnv = "IDEM_INBOXTEST_CRASH_LOCATION"
	crashReady       = "inboxtest: child ready to be killed"
	crashID          = "crash-message"
	crashBody        = `{"amount":1}`
	crashEffect      = "crash"
	crashConsumer    = "crash-consumer"
)

// crashMode is where the child waits to be killed.
type crashMode string

const (
	afterCommit   crashMode = "after-commit"   // Process returned Applied; the ack is not sent
	insideHandler crashMode = "inside-handler" // the effect is written, not committed
)

func recordSurvivesReopen(t testing.TB, h *Harness) {
	e := setup(t, h)
	handler, ran := e.handler("reopen", nil)
	process(t, e.inbox(t, "c", nil), msg("m-1", "body", 1), handler, inbox.Applied)
	e.close(t)
	e.open(t)
	process(t, e.inbox(t, "c", nil), msg("m-1", "body", 2), handler, inbox.Duplicate)
	runs(t, ran, 1)
	e.effectsAre(t, "reopen", 1)
}

func killedAfterCommitBeforeAckIsDuplicate(t testing.TB, h *Harness) {
	e := setup(t, h)
	killChild(t, e, afterCommit)
	e.effectsAre(t, crashEffect, 1)
	// The broker never got the ack: it delivers the message again.
	ib := e.realClockInbox(t)
	handler, ran := e.handler(crashEffect, nil)
	process(t, ib, msg(crashID, crashBody, 2), handler, inbox.Duplicate)
	runs(t, ran, 0)
	e.effectsAre(t, crashEffect, 1)
}

func killedInsideHandlerLeavesNothing(t testing.TB, h *Harness) {
	e := setup(t, h)
	killChild(t, e, insideHandler)
	e.effectsAre(t, crashEffect, 0)
	ib := e.realClockInbox(t)
	e.assertNoRecord(t, ib, crashID)
	handler, ran := e.handler(crashEffect, nil)
	// A database server may take a moment to notice the dead connection
	// and release its lock: the id must come free, boundedly.
	var got inbox.Outcome
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 2; ; attempt++ {
		got, err = ib.Process(context.Background(), msg(crashID, crashBody, attempt), handler)
		if got != inbox.Retry || !errors.Is(err, idem.ErrInFlight) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got != inbox.Applied {
		t.Fatalf("redelivery after the crash = %s (%v), want applied", got, err)
	}
	runs(t, ran, 1)
	e.effectsAre(t, crashEffect, 1)
}

// realClockInbox is the inbox the crash child uses, on the real clock as
// the child's.
func (e *env) realClockInbox(t testing.TB) *inbox.Inbox {
	return e.inbox(t, crashConsumer, &inbox.Config{Now: time.Now})
}

// killChild runs the test binary as a consumer that delivers the crash
// message, waits until it reports being at mode, kills it with SIGKILL
// and reopens the store.
func killChild(t testing.TB, e *env, mode crashMode) {
	t.Helper()
	// The child is the consumer meanwhile: a store may allow one writing
	// process per location (sqlitestore does), so this one steps aside
	// and reopens after the kill, as a restarted consumer would.
	e.close(t)
	crashchild.Kill(t, []string{crashModeEnv + "=" + string(mode), crashLocationEnv + "=" + e.location}, crashReady)
	e.open(t)
}

// runCrashChild is the child side of the crash cases: a consumer that
// delivers the crash message and waits to be killed where mode says, on
// the store at the location the parent passed.
func runCrashChild(h *Harness, mode string) {
	at := crashMode(mode)
	ctx := context.Background()
	s, err := h.Open(ctx, os.Getenv(crashLocationEnv))
	if err != nil {
		crashchild.Fail("inboxtest", "open:", err)
	}
	ib, err := inbox.New(s, &inbox.Config{Name: crashConsumer})
	if err != nil {
		crashchild.Fail("inboxtest", err)
	}
	o, err := ib.Process(ctx, msg(crashID, crashBody, 1), func(ctx context.Context, m *inbox.Message) error {
		if err := h.Effect(ctx, crashEffect); err != nil {
			return err
		}
		if at == insideHandler {
			crashchild.Ready("inboxtest", crashReady) // never returns
		}
		return nil
	})
	if at != afterCommit || o != inbox.Applied {
		crashchild.Fail("inboxtest", "Process returned", o, err)
	}
	// Committed; the adapter would ack now.
	crashchild.Ready("inboxtest", crashReady)
}
