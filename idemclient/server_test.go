package idemclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// The server side of the end-to-end tests: the real idemhttp middleware over
// memstore, behind a layer that injects network faults. Intents carry an
// X-Intent header naming them so that the server can count, per intent, the
// keys it saw and the effects it committed.

// countingStore is a memstore that counts committed effects per intent: a
// commit is the one moment an effect becomes real.
type countingStore struct {
	*memstore.Store
	mu      sync.Mutex
	applied map[string]int
}

func newCountingStore() *countingStore {
	return &countingStore{Store: memstore.New(), applied: make(map[string]int)}
}

func (s *countingStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	rec, tx, err := s.Store.Begin(ctx, p)
	if tx == nil {
		return rec, tx, err
	}
	return rec, &countingTx{Tx: tx, store: s}, err
}

func (s *countingStore) Applied(intent string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied[intent]
}

func (s *countingStore) AppliedAll() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.applied))
	for k, v := range s.applied {
		out[k] = v
	}
	return out
}

type countingTx struct {
	idem.Tx
	store *countingStore
}

func (tx *countingTx) Commit(ctx context.Context, p *idem.CommitParams) error {
	err := tx.Tx.Commit(ctx, p)
	if err == nil {
		var body struct{ Intent string }
		if json.Unmarshal(p.Record.Result.Body, &body) == nil {
			tx.store.mu.Lock()
			tx.store.applied[body.Intent]++
			tx.store.mu.Unlock()
		}
	}
	return err
}

// transferHandler is the effect: it writes the transfer through the
// request's memstore transaction and answers 201.
func transferHandler(w http.ResponseWriter, r *http.Request) {
	tx, ok := memstore.TxFrom(r.Context())
	if !ok {
		http.Error(w, "no transaction", http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Header.Get("X-Intent")
	tx.Set("transfer:"+id, string(body))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"intent":%q}`, id)
}

// newIdemHandler returns the idempotent transfer service over store.
func newIdemHandler(t testing.TB, store idem.Store) http.Handler {
	t.Helper()
	guard, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(guard, &idemhttp.Config{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(transferHandler))
	// The authentication layer of a real service: every caller here is
	// one principal.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(idem.WithPrincipal(r.Context(), "user:test")))
	})
}

// fault is what the fault layer does to one attempt.
type fault int

const (
	faultNone        fault = iota
	faultDropAfter         // execute, then close the connection without an answer
	faultResetAfter        // execute, then reset the connection (RST)
	faultResetBefore       // reset the connection without executing
	faultSlowAfter         // execute, then hold the answer past the client's timeout
	faultSlowBefore        // wait past the client's timeout, then execute anyway
	faultInFlight          // answer 409 with Retry-After, as if the key were held
	faultUnavailable       // answer 503 with Retry-After
	numFaults
)

var faultNames = [numFaults]string{"none", "drop-after", "reset-after", "reset-before", "slow-after", "slow-before", "409", "503"}

// faultServer sits in front of next and applies pick(intent, attempt) to
// each attempt (attempt counts from 1). It records, per intent, every key
// it saw.
type faultServer struct {
	t    testing.TB
	next http.Handler
	pick func(intent string, attempt int) fault

	mu       sync.Mutex
	attempts map[string]int
	keys     map[string]map[string]int
	faults   [numFaults]int
}

func newFaultServer(t testing.TB, next http.Handler, pick func(string, int) fault) *faultServer {
	return &faultServer{t: t, next: next, pick: pick, attempts: make(map[string]int), keys: make(map[string]map[string]int)}
}

func (f *faultServer) Keys(intent string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int)
	for k, v := range f.keys[intent] {
		out[k] = v
	}
	return out
}

func (f *faultServer) Faults() [numFaults]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.faults
}

func (f *faultServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Read the body now: a fault that runs the handler after the client
	// has gone still has it.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	id := r.Header.Get("X-Intent")
	key, err := idem.ParseKey(r.Header.Get("Idempotency-Key"))
	if err != nil {
		key = "invalid:" + r.Header.Get("Idempotency-Key")
	}
	f.mu.Lock()
	f.attempts[id]++
	n := f.attempts[id]
	if f.keys[id] == nil {
		f.keys[id] = make(map[string]int)
	}
	f.keys[id][key]++
	ft := f.pick(id, n)
	f.faults[ft]++
	f.mu.Unlock()

	switch ft {
	case faultNone:
		f.next.ServeHTTP(w, r)
	case faultDropAfter, faultResetAfter:
		f.next.ServeHTTP(httptest.NewRecorder(), r)
		hijackClose(f.t, w, ft == faultResetAfter)
	case faultResetBefore:
		hijackClose(f.t, w, true)
	case faultSlowAfter:
		f.next.ServeHTTP(httptest.NewRecorder(), r)
		waitGone(r)
		w.WriteHeader(http.StatusCreated) // too late: nobody reads it
	case faultSlowBefore:
		waitGone(r)
		f.next.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
	case faultInFlight, faultUnavailable:
		status := http.StatusConflict
		if ft == faultUnavailable {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Retry-After", "1")
		writeProblem(w, status, "about:blank", http.StatusText(status), "injected")
	}
}

// waitGone waits until the client has given up on r (bounded, in case it
// never does).
func waitGone(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}
