package inboxtest

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/internal/testclock"
)

// env is one case's store and clock.
type env struct {
	h        *Harness
	location string
	store    idem.Store
	clock    *testclock.Clock
}

func setup(t testing.TB, h *Harness) *env {
	t.Helper()
	e := &env{h: h, location: h.NewLocation(t), clock: testclock.New()}
	e.open(t)
	return e
}

func (e *env) open(t testing.TB) {
	t.Helper()
	e.store = conformance.Open(t, e.h.Open, e.h.Close, e.location)
}

func (e *env) close(t testing.TB) {
	t.Helper()
	conformance.Close(t, e.h.Close, e.store)
}

// inbox returns an inbox named name on the case's store; unless cfg says
// otherwise, it reads the case's clock.
func (e *env) inbox(t testing.TB, name string, cfg *inbox.Config) *inbox.Inbox {
	t.Helper()
	var c inbox.Config
	if cfg != nil {
		c = *cfg
	}
	c.Name = name
	// Every delivery reaches the store: the Guard's in-process answers off.
	c.ReplayCacheBytes, c.DisableLocalInFlight = -1, true
	if c.Now == nil {
		c.Now = e.clock.Now
	}
	ib, err := inbox.New(e.store, &c)
	if err != nil {
		t.Fatal(err)
	}
	return ib
}

func (e *env) effects(t testing.TB, name string) int {
	t.Helper()
	return conformance.Effects(t, e.h.CountEffects, e.store, name)
}

// handler returns a Handler that writes the effect name and then returns
// what then returns (nil if then is nil), and a counter of its runs.
func (e *env) handler(name string, then func(ctx context.Context, m *inbox.Message) error) (inbox.Handler, *conformance.Counter) {
	c := &conformance.Counter{}
	return func(ctx context.Context, m *inbox.Message) error {
		c.Add()
		if err := e.h.Effect(ctx, name); err != nil {
			return err
		}
		if then != nil {
			return then(ctx, m)
		}
		return nil
	}, c
}

// record returns the stored record of id in ib, nil when there is none,
// and false when the store is not an idem.Inspector.
func (e *env) record(t testing.TB, ib *inbox.Inbox, id string) (*idem.Record, bool) {
	t.Helper()
	in, ok := e.store.(idem.Inspector)
	if !ok {
		return nil, false
	}
	rec, err := in.Lookup(context.Background(), &idem.LookupParams{Scope: idem.StoredScope(ib.Scope()), Key: inbox.Key(id)})
	switch {
	case errors.Is(err, idem.ErrNotFound):
		return nil, true
	case err != nil:
		t.Fatalf("Lookup(%q): %v", id, err)
	case rec == nil:
		t.Fatalf("Lookup(%q) = nil, nil; want a record or ErrNotFound", id)
	}
	return rec, true
}

// assertNoRecord checks that id has no record in ib, when the store is an
// idem.Inspector.
func (e *env) assertNoRecord(t testing.TB, ib *inbox.Inbox, id string) {
	t.Helper()
	if rec, ok := e.record(t, ib, id); ok && rec != nil {
		t.Errorf("id %q has a record %+v; want none", id, rec)
	}
}

// process delivers m and checks the outcome; the error is returned for
// the caller to check.
func process(t testing.TB, ib *inbox.Inbox, m *inbox.Message, h inbox.Handler, want inbox.Outcome) error {
	t.Helper()
	got, err := ib.Process(context.Background(), m, h)
	if got != want {
		t.Errorf("Process(id %q, attempt %d) = %s (err %v), want %s", m.ID, m.Attempt, got, err, want)
	}
	return err
}

func msg(id, body string, attempt int) *inbox.Message {
	return &inbox.Message{ID: id, Body: []byte(body), Attempt: attempt}
}

// runs checks that a handler ran want times.
func runs(t testing.TB, c *conformance.Counter, want int) {
	t.Helper()
	if n := c.Get(); n != want {
		t.Errorf("handler ran %d times, want %d", n, want)
	}
}

// effectsAre checks the committed effects called name.
func (e *env) effectsAre(t testing.TB, name string, want int) {
	t.Helper()
	if n := e.effects(t, name); n != want {
		t.Errorf("effects %q = %d, want %d", name, n, want)
	}
}
