package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem/internal/tbrecord"
)

// store is a test store: an interface, as the suites' stores are.
type store interface{ Name() string }

type named string

func (n named) Name() string { return string(n) }

func TestOpenCloseEffects(t *testing.T) {
	t.Parallel()
	var closed []string
	closeFn := func(s store) error {
		closed = append(closed, s.Name())
		if s.Name() == "bad" {
			return errors.New("cannot close")
		}
		return nil
	}
	open := func(_ context.Context, location string) (store, error) {
		switch location {
		case "missing":
			return nil, errors.New("no such location")
		case "nil":
			return nil, nil
		}
		return named(location), nil
	}
	count := func(_ context.Context, s store, name string) (int, error) {
		if name == "bad" {
			return 0, errors.New("cannot count")
		}
		return len(s.Name() + name), nil
	}
	for _, tt := range []struct {
		name   string
		run    func(tb testing.TB)
		failed string // what the log says, when the case fails
		closed string
	}{
		{"Opens", func(tb testing.TB) {
			s := Open(tb, open, closeFn, "here")
			if n := Effects(tb, count, s, "ab"); n != 6 {
				tb.Errorf("Effects = %d, want 6", n)
			}
			Close(tb, closeFn, s)
		}, "", "here,here"},
		{"OpenFails", func(tb testing.TB) { Open(tb, open, closeFn, "missing") }, `Open("missing"): no such location`, ""},
		{"OpenReturnsNil", func(tb testing.TB) { Open(tb, open, closeFn, "nil") }, `Open("nil") returned a nil store`, ""},
		{"CloseFails", func(tb testing.TB) { Close(tb, closeFn, store(named("bad"))) }, "Close: cannot close", "bad"},
		{"CountFails", func(tb testing.TB) { Effects(tb, count, store(named("x")), "bad") }, `CountEffects("bad"): cannot count`, ""},
		{"NoClose", func(tb testing.TB) { Close(tb, nil, Open(tb, open, nil, "here")) }, "", ""},
	} {
		closed = nil
		o := tbrecord.Run(t, tt.name, 0, tt.run)
		if o.Failed != (tt.failed != "") || !strings.Contains(o.Log, tt.failed) {
			t.Errorf("%s: failed=%v log %q; want failed=%v with %q", tt.name, o.Failed, o.Log, tt.failed != "", tt.failed)
		}
		if got := strings.Join(closed, ","); got != tt.closed {
			t.Errorf("%s: closed %q, want %q", tt.name, got, tt.closed)
		}
	}
}

func TestStartValidatesAndPlaysTheChild(t *testing.T) {
	s := testSuite()
	if o := tbrecord.Run(t, "Invalid", 0, func(tb testing.TB) { s.start(tb, nil) }); !o.Failed || o.Log != "no harness\n" {
		t.Errorf("start with an invalid harness: failed=%v log %q; want the Validate error", o.Failed, o.Log)
	}
	var played string
	s.ChildEnv = "IDEM_CONFORMANCE_TEST_CHILD"
	s.Child = func(_ *harness, v string) { played = v }
	s.start(t, &harness{})
	if played != "" {
		t.Errorf("the child played %q without its variable", played)
	}
	t.Setenv(s.ChildEnv, "at-location")
	s.start(t, &harness{})
	if played != "at-location" {
		t.Errorf("the child played %q, want at-location", played)
	}
}
