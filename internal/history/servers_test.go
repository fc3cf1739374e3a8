package history_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/history"
	"github.com/idemkit/idem/memstore"
)

// drive sends, for each of keys keys, a storm of 4 concurrent attempts and
// then 2 sequential retries, through a recording transport.
func drive(t *testing.T, h http.Handler, keys int) *history.Recorder {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	rec := new(history.Recorder)
	send := func(client int, key string) {
		c := &http.Client{Transport: rec.Transport(client, srv.Client().Transport)}
		req, _ := http.NewRequest("POST", srv.URL+"/transfers", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := c.Do(req)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Go(func() { send(c, key) })
		}
		wg.Wait()
		send(0, key)
		send(1, key)
	}
	return rec
}

// slowWork is a handler that takes long enough for a storm to overlap it
// and answers a fresh id per execution.
func slowWork(executions *atomic.Int64, gate <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := executions.Add(1)
		if gate != nil {
			<-gate
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, n)
	}
}

func TestCorrectServerIsLinearizable(t *testing.T) {
	guard, err := idem.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(guard, &idemhttp.Config{Anonymous: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	rec := drive(t, mw.Handler(slowWork(&n, nil)), 16)
	res := history.Require(t, rec)
	if res.Keys != 16 || res.Ops+res.Dropped != 16*6 {
		t.Fatalf("checked %d keys, %d operations; want 16 and %d", res.Keys, res.Ops, 16*6)
	}
}

// broken servers, each wrong in one way the checker must see.
func brokenServers() map[string]http.Handler {
	var mu sync.Mutex
	type rec struct {
		body string
		n    int
	}
	seen := map[string]*rec{}
	var ids atomic.Int64
	answer := func(w http.ResponseWriter, status int, replayed bool, body string) {
		if replayed {
			w.Header().Set(idemhttp.ReplayedHeader, "true")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
	// lookup returns the key's record, creating it on the first call.
	lookup := func(r *http.Request) (rec, bool) {
		mu.Lock()
		defer mu.Unlock()
		k := r.Header.Get("Idempotency-Key")
		if s, ok := seen[k]; ok {
			s.n++
			return *s, false
		}
		s := &rec{body: fmt.Sprintf(`{"id":%d}`, ids.Add(1))}
		seen[k] = s
		return *s, true
	}
	return map[string]http.Handler{
		// No idempotency at all: every attempt executes.
		"second execution": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			answer(w, 201, false, fmt.Sprintf(`{"id":%d}`, ids.Add(1)))
		}),
		// Replays carry a body that is not the recorded one (a field
		// regenerated on replay).
		"replay that differs": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, fresh := lookup(r)
			if fresh {
				answer(w, 201, false, s.body)
				return
			}
			answer(w, 201, true, strings.TrimSuffix(s.body, "}")+fmt.Sprintf(`,"served":%d}`, s.n))
		}),
		// A completed key answers 409 forever instead of replaying.
		"409 without overlap": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, fresh := lookup(r)
			if fresh {
				answer(w, 201, false, s.body)
				return
			}
			answer(w, 409, false, `{"title":"in flight"}`)
		}),
	}
}

// fakeT records what Require reports instead of failing the test.
type fakeT struct {
	testing.TB
	errors []string
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeT) Helper() {}

func TestBrokenServersFail(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(history.DirEnv, dir)
	for name, h := range brokenServers() {
		t.Run(name, func(t *testing.T) {
			rec := drive(t, h, 4)
			ft := &fakeT{TB: t}
			res := history.Require(ft, rec)
			if res.Ok || len(res.Violations) != 4 {
				t.Fatalf("the checker passed a broken server or missed keys: %s", res)
			}
			if len(ft.errors) != 1 || !strings.Contains(ft.errors[0], "visualization: ") {
				t.Fatalf("Require reported %q, want one error naming the visualization", ft.errors)
			}
			path := ft.errors[0][strings.LastIndex(ft.errors[0], " ")+1:]
			if filepath.Dir(path) != dir {
				t.Fatalf("visualization at %s, want it in %s", path, dir)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "<html") || !strings.Contains(string(b), "key-0") {
				t.Fatalf("%s is not porcupine's visualization of the history (%d bytes)", path, len(b))
			}
		})
	}
}
