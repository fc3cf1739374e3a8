package idemclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem/idemclient"
)

// TestDoJournal checks rule C3 in the client: the intent is in the journal
// before its first attempt reaches the server; a final answer (2xx or 4xx)
// resolves it; a budget exhausted or a 5xx leaves it pending.
func TestDoJournal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		wantPending bool
	}{
		{"Created", http.StatusCreated, false},
		{"Unprocessable", http.StatusUnprocessableEntity, false},
		{"BadRequest", http.StatusBadRequest, false},
		{"Unavailable", http.StatusServiceUnavailable, true},
		{"Internal", http.StatusInternalServerError, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := openJournal(t)
			var e *testEnv
			var in *idemclient.Intent
			e = setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					ins, err := j.Pending(r.Context())
					if err != nil || len(ins) != 1 || ins[0].Key != in.Key {
						t.Errorf("first attempt: got pending %v, %v; want the intent journaled", ins, err)
					}
				}
				w.WriteHeader(tt.status)
			}, func(c *idemclient.Config) {
				c.Journal = j
				c.MaxAttempts = 3
			})
			in = e.intent(t, `{"amount":3}`)
			_, _ = e.client.Do(context.Background(), in)
			got := slices.Contains(pendingKeys(t, j), in.Key)
			if got != tt.wantPending {
				t.Errorf("pending after Do: got %v, want %v", got, tt.wantPending)
			}
		})
	}
}

type failingJournal struct{ idemclient.Journal }

func (failingJournal) Save(context.Context, *idemclient.Intent) error {
	return errors.New("disk full")
}

// TestDoJournalSaveFails checks that nothing is sent when the intent cannot
// be persisted.
func TestDoJournalSaveFails(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}, func(c *idemclient.Config) { c.Journal = failingJournal{} })
	if _, err := e.client.Do(context.Background(), e.intent(t, `{}`)); err == nil {
		t.Fatal("got nil, want the journal's error")
	}
	if got := len(e.server.Seen()); got != 0 {
		t.Errorf("attempts: got %d, want 0", got)
	}
}

// TestResume checks rule C3: intents left pending (here by a server that
// was down) are carried out later with their original keys.
func TestResume(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	var up atomic.Bool
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, r.Header.Get("Idempotency-Key"))
	}, func(c *idemclient.Config) {
		c.Journal = j
		c.MaxAttempts = 2
	})
	var keys []string
	for range 3 {
		in := e.intent(t, `{"amount":4}`)
		keys = append(keys, in.Key)
		if _, err := e.client.Do(context.Background(), in); !errors.Is(err, idemclient.ErrExhausted) {
			t.Fatalf("got %v, want ErrExhausted", err)
		}
	}
	slices.Sort(keys)
	got := pendingKeys(t, j)
	slices.Sort(got)
	if !slices.Equal(got, keys) {
		t.Fatalf("pending: got %q, want %q", got, keys)
	}

	up.Store(true)
	outs, err := e.client.Resume(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(outs), 3; got != want {
		t.Fatalf("outcomes: got %d, want %d", got, want)
	}
	for _, o := range outs {
		if o.Err != nil || o.Response.Status != http.StatusCreated || string(o.Response.Body) != o.Intent.Key {
			t.Errorf("outcome for %s: got %+v, %v; want 201 carrying its own key", o.Intent.Key, o.Response, o.Err)
		}
	}
	if got := pendingKeys(t, j); len(got) != 0 {
		t.Errorf("pending after Resume: got %q, want none", got)
	}
	// Every attempt, before and after the "restart", used a journaled key.
	for _, s := range e.server.Seen() {
		if !slices.Contains(keys, s.Key) {
			t.Errorf("attempt with key %q, want one of the intents' keys", s.Key)
		}
	}
}

func TestResumeWithoutJournal(t *testing.T) {
	t.Parallel()
	c, err := idemclient.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(context.Background()); err == nil {
		t.Error("got nil, want an error naming Config.Journal")
	}
}

// TestResumeAroundUnreadableEntry checks that one unreadable journal file
// does not stop Resume: it carries out every readable pending intent and
// returns their results with an error naming the bad files.
func TestResumeAroundUnreadableEntry(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	var up atomic.Bool
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}, func(c *idemclient.Config) {
		c.Journal = j
		c.MaxAttempts = 1
	})
	var keys []string
	for range 2 {
		in := e.intent(t, `{"amount":6}`)
		keys = append(keys, in.Key)
		if _, err := e.client.Do(context.Background(), in); !errors.Is(err, idemclient.ErrExhausted) {
			t.Fatalf("got %v, want ErrExhausted", err)
		}
	}
	bad := writeBadEntries(t, j)

	up.Store(true)
	results, err := e.client.Resume(context.Background())
	if !errors.Is(err, idemclient.ErrUnreadableIntent) || !strings.Contains(err.Error(), bad[0]) {
		t.Errorf("Resume error: got %v, want ErrUnreadableIntent naming %s", err, bad[0])
	}
	var done []string
	for _, r := range results {
		if r.Err != nil || r.Response.Status != http.StatusCreated {
			t.Errorf("result for %s: got %+v, %v; want 201", r.Intent.Key, r.Response, r.Err)
		}
		done = append(done, r.Intent.Key)
	}
	slices.Sort(done)
	slices.Sort(keys)
	if !slices.Equal(done, keys) {
		t.Errorf("resumed: got %q, want %q", done, keys)
	}
	if ins, err := j.Pending(context.Background()); len(ins) != 0 || !errors.Is(err, idemclient.ErrUnreadableIntent) {
		t.Errorf("Pending after Resume: got %d intents, %v; want none and the bad files reported", len(ins), err)
	}
}
