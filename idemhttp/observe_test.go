package idemhttp_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Every outcome is logged with a hash of the key, never the key, and
// reaches the observer with its route, status and duration.
func TestLogsAndObserver(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const key = "secret-key-7f3a"
	handler := e.mw.Handler(&effectHandler{before: func(http.ResponseWriter, *http.Request) {
		time.Sleep(2 * time.Millisecond)
	}})
	serve(handler, "POST", "/transfers", "{}", withKey(key))
	serve(handler, "POST", "/transfers", "{}", withKey(key))
	serve(handler, "POST", "/transfers", `{"x":1}`, withKey(key))
	serve(handler, "POST", "/transfers", "{}")
	serve(handler, "POST", "/transfers", "{}", withKey("a,"+key))

	logs := e.logs.String()
	if strings.Contains(logs, key) {
		t.Errorf("logs contain the key:\n%s", logs)
	}
	if got, want := strings.Count(logs, "key_sha256="+idem.KeyHash(key)), 3; got != want {
		t.Errorf("lines with the key's hash: got %d, want %d:\n%s", got, want, logs)
	}
	for _, o := range []string{"executed", "replayed", "mismatch", "missing_key", "invalid_key"} {
		if !strings.Contains(logs, "outcome="+o) {
			t.Errorf("logs: no line for %s:\n%s", o, logs)
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	h := idem.KeyHash(key)
	want := []idem.Event{
		{Transport: idem.TransportHTTP, Outcome: idem.OutcomeExecuted, Method: "POST", Route: "/transfers", Status: 201, KeyHash: h, ReplayCache: idem.CacheMiss},
		{Transport: idem.TransportHTTP, Outcome: idem.OutcomeReplayed, Method: "POST", Route: "/transfers", Status: 201, KeyHash: h, ReplayCache: idem.CacheHit},
		{Transport: idem.TransportHTTP, Outcome: idem.OutcomeMismatch, Method: "POST", Route: "/transfers", Status: 422, KeyHash: h, ReplayCache: idem.CacheHit},
		{Transport: idem.TransportHTTP, Outcome: idem.OutcomeMissingKey, Method: "POST", Route: "/transfers", Status: 400},
		{Transport: idem.TransportHTTP, Outcome: idem.OutcomeInvalidKey, Method: "POST", Route: "/transfers", Status: 400},
	}
	if got, want := len(e.events), len(want); got != want {
		t.Fatalf("events: got %d, want %d", got, want)
	}
	for i, ev := range e.events {
		if ev.Duration <= 0 {
			t.Errorf("event %d: duration %s, want positive", i, ev.Duration)
		}
		ev.Duration = 0
		if ev != want[i] {
			t.Errorf("event %d: got %+v, want %+v", i, ev, want[i])
		}
	}
	if d := e.events[0].Duration; d < 2*time.Millisecond {
		t.Errorf("executed duration: got %s, want it to include the handler's 2ms", d)
	}
}

// At Info, the level a server logs at, an ordinary request writes no line:
// executions, replays, duplicates in flight and a client's missing key are
// Debug. A key reused with another request is a Warn line.
func TestOrdinaryOutcomesAreDebug(t *testing.T) {
	t.Parallel()
	e := setup(t, atLevel(slog.LevelInfo))
	buf := e.logs
	h := e.mw.Handler(&effectHandler{})
	serve(h, "POST", "/transfers", "{}", withKey("k1"))
	serve(h, "POST", "/transfers", "{}", withKey("k1"))
	serve(h, "POST", "/transfers", "{}")
	serve(h, "POST", "/transfers", "{}", withKey("a,b"))
	if got := buf.String(); got != "" {
		t.Fatalf("at Info, ordinary requests logged:\n%s", got)
	}
	serve(h, "POST", "/transfers", `{"x":1}`, withKey("k1"))
	if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "level=WARN") || !strings.Contains(got, "outcome=mismatch") {
		t.Fatalf("a reused key: got %q, want one WARN line", got)
	}
}

func TestKeyHash(t *testing.T) {
	t.Parallel()
	// SHA-256("abc") starts with ba7816bf8f01.
	if got, want := idem.KeyHash("abc"), "ba7816bf8f01"; got != want {
		t.Errorf("KeyHash: got %q, want %q", got, want)
	}
}
