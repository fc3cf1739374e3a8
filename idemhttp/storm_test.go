package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// stormTarget is a store under a duplicate storm: a guard over it, an effect
// written through the store's transaction found in ctx, and a count of the
// committed effects.
type stormTarget struct {
	guard   *idem.Guard
	effect  func(ctx context.Context) error
	effects func(t *testing.T) int
}

// testStorm checks E2 and E3 through real HTTP: many clients send the same
// key at once; exactly one runs the handler, which holds on until every
// other client has been answered, and every other client gets 409 with
// Retry-After while it runs. Afterwards a retry gets the replay.
func testStorm(t *testing.T, target stormTarget) {
	t.Helper()
	const clients = 50
	mw, err := idemhttp.New(target.guard, &idemhttp.Config{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var runs atomic.Int64
	handler := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if err := target.effect(r.Context()); err != nil {
			t.Errorf("effect: %v", err)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		select {
		case <-release:
		case <-time.After(20 * time.Second):
			t.Errorf("the other clients were not all answered while the first one ran")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"transfer":"t-1","amount":10}`)
	}))
	srv := httptest.NewServer(bearerAuth(handler))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	post := func() (status int, retryAfter, replayed, body string, err error) {
		req, err := http.NewRequest("POST", srv.URL+"/transfers", strings.NewReader(`{"amount":10}`))
		if err != nil {
			return 0, "", "", "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Idempotency-Key", "storm-key")
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", "", "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(idemhttp.ReplayedHeader), string(b), err
	}

	var (
		wg        sync.WaitGroup
		answered  atomic.Int64
		once      sync.Once
		mu        sync.Mutex
		statuses  = map[int]int{}
		firstBody string
	)
	start := make(chan struct{})
	for range clients {
		wg.Go(func() {
			<-start
			status, retryAfter, _, body, err := post()
			if err != nil {
				t.Errorf("request: %v", err)
			}
			if status == http.StatusConflict && retryAfter == "" {
				t.Errorf("409 without Retry-After")
			}
			mu.Lock()
			statuses[status]++
			if status == http.StatusCreated {
				firstBody = body
			}
			mu.Unlock()
			if answered.Add(1) == clients-1 {
				once.Do(func() { close(release) })
			}
		})
	}
	close(start)
	wg.Wait()
	once.Do(func() { close(release) })

	if got, want := runs.Load(), int64(1); got != want {
		t.Errorf("handler runs: got %d, want %d", got, want)
	}
	if got, want := target.effects(t), 1; got != want {
		t.Errorf("committed effects: got %d, want %d", got, want)
	}
	if got, want := statuses[http.StatusCreated], 1; got != want {
		t.Errorf("201 answers: got %d, want %d (all: %v)", got, want, statuses)
	}
	if got, want := statuses[http.StatusConflict], clients-1; got != want {
		t.Errorf("409 answers: got %d, want %d (all: %v)", got, want, statuses)
	}

	status, _, replayed, body, err := post()
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusCreated || replayed != "true" || body != firstBody {
		t.Errorf("retry: got %d replayed=%q %q, want 201 replayed=\"true\" %q", status, replayed, body, firstBody)
	}
	if got, want := runs.Load(), int64(1); got != want {
		t.Errorf("handler runs after the retry: got %d, want %d", got, want)
	}
}

func TestStormMemstore(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	testStorm(t, stormTarget{
		guard: g,
		effect: func(ctx context.Context) error {
			tx, _ := memstore.TxFrom(ctx)
			tx.Set(fmt.Sprintf("transfer/%d", n.Add(1)), "10")
			return nil
		},
		effects: func(t *testing.T) int {
			count := 0
			for i := range n.Load() {
				if _, ok := store.Value(fmt.Sprintf("transfer/%d", i+1)); ok {
					count++
				}
			}
			return count
		},
	})
}
