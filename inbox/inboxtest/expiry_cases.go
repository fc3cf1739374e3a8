package inboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
)

func idIsRememberedForSevenDaysByDefault(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", nil)
	handler, ran := e.handler("week", nil)
	process(t, ib, msg("m-1", "body", 1), handler, inbox.Applied)
	e.clock.Advance(7*24*time.Hour - time.Second)
	process(t, ib, msg("m-1", "body", 1), handler, inbox.Duplicate)
	e.clock.Advance(time.Second)
	// Forgotten: the delivery runs again, as documented.
	process(t, ib, msg("m-1", "body", 1), handler, inbox.Applied)
	process(t, ib, msg("m-1", "body", 2), handler, inbox.Duplicate)
	runs(t, ran, 2)
	e.effectsAre(t, "week", 2)
}

func configuredTTLSetsExpiry(t testing.TB, h *Harness) {
	e := setup(t, h)
	ib := e.inbox(t, "c", &inbox.Config{TTL: time.Hour})
	handler, ran := e.handler("hour", nil)
	process(t, ib, msg("m-1", "body", 1), handler, inbox.Applied)
	e.clock.Advance(time.Hour - time.Millisecond)
	process(t, ib, msg("m-1", "body", 2), handler, inbox.Duplicate)
	e.clock.Advance(time.Millisecond)
	process(t, ib, msg("m-1", "other body", 1), handler, inbox.Applied) // expired: not a conflict either
	runs(t, ran, 2)
	e.effectsAre(t, "hour", 2)
}

func sweeperDeletesExpiredInboxRecords(t testing.TB, h *Harness) {
	e := setup(t, h)
	deleter, ok := e.store.(idem.ExpiredDeleter)
	if _, inspects := e.store.(idem.Inspector); !ok || !inspects {
		t.Skip("the store is not an idem.ExpiredDeleter and an idem.Inspector")
	}
	ib := e.inbox(t, "c", &inbox.Config{TTL: time.Hour})
	handler, _ := e.handler("swept", nil)
	process(t, ib, msg("old", "body", 1), handler, inbox.Applied)
	e.clock.Advance(30 * time.Minute)
	process(t, ib, msg("new", "body", 1), handler, inbox.Applied)
	refuse, _ := e.handler("swept", func(context.Context, *inbox.Message) error { return inbox.Refuse(errBusiness) })
	process(t, ib, msg("new-refused", "body", 1), refuse, inbox.Refused)

	// "old" expired at +60 min; with the sweeper's 10-minute grace it
	// goes at +70 min, while "new" and "new-refused" live until +90.
	e.clock.Advance(41 * time.Minute)
	sw, err := idem.NewSweeper(deleter, &idem.SweeperConfig{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	n, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("Sweep deleted %d records, want 1", n)
	}
	e.assertNoRecord(t, ib, "old")
	for _, id := range []string{"new", "new-refused"} {
		if rec, _ := e.record(t, ib, id); rec == nil {
			t.Errorf("the sweep deleted the live record of %q", id)
		}
	}
	process(t, ib, msg("new", "body", 2), handler, inbox.Duplicate)
	process(t, ib, msg("new-refused", "body", 2), handler, inbox.Duplicate)
	e.effectsAre(t, "swept", 2) // old and new
}
