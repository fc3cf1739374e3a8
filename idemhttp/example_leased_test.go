package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// A payout route in leased mode: the handler debits the account in a local
// step (its write and its recovery point commit together), charges a
// payment provider with the step's derived key, and answers. The provider
// fails the first charge; the handler answers 503, the claim is released
// with the debit recorded, and the client's retry resumes at the charge:
// the account is debited once and charged once. A third request gets the
// recorded answer.
func Example_leased() {
	// The provider honours idempotency keys: one charge per key.
	var mu sync.Mutex
	charges := map[string]string{}
	failNext := true
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if failNext {
			failNext = false
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if _, ok := charges[key]; !ok {
			charges[key] = "ch_" + strconv.Itoa(len(charges)+1)
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q}`, charges[key])
	}))
	defer provider.Close()

	store := memstore.New() // pgstore or sqlitestore in production
	guard, err := idem.New(store, nil)
	if err != nil {
		panic(err)
	}
	leased, err := idem.NewLeased(store, nil) // 30 s leases
	if err != nil {
		panic(err)
	}
	mw, err := idemhttp.New(guard, &idemhttp.Config{Leased: leased, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}

	payout := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		run, _ := idem.RunFrom(ctx)
		var in struct{ Amount int }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount <= 0 {
			http.Error(w, "bad amount", http.StatusUnprocessableEntity) // recorded: final
			return
		}
		_, err := run.LocalStep(ctx, "debit", func(ctx context.Context) ([]byte, error) {
			tx, _ := memstore.TxFrom(ctx) // the step's transaction
			b := 100                      // the opening balance
			if v, ok := tx.Get("balance/acc-1"); ok {
				b, _ = strconv.Atoi(v)
			}
			tx.Set("balance/acc-1", strconv.Itoa(b-in.Amount))
			return nil, nil
		})
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		charge, err := run.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
			req, _ := http.NewRequestWithContext(ctx, "POST", provider.URL+"/charges", strings.NewReader(`{"amount":10}`))
			req.Header.Set("Idempotency-Key", run.DerivedKey("charge")) // the same on every attempt
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err // unknown outcome: retried with the same key
			}
			defer resp.Body.Close()
			if resp.StatusCode >= 500 {
				return nil, fmt.Errorf("provider answered %d", resp.StatusCode)
			}
			var c struct{ ID string }
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
				return nil, err
			}
			return []byte(c.ID), nil
		})
		if err != nil {
			// Not final: the claim is released with the debit recorded.
			w.Header().Set("Retry-After", "1")
			http.Error(w, "provider unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%q}`, charge)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /payouts", mw.Route(idemhttp.RouteOptions{Leased: true, Kind: "payout"})(payout))
	server := httptest.NewServer(authenticate(map[string]string{"token-1": "user:42"}, mux))
	defer server.Close()

	for range 3 {
		req, _ := http.NewRequest("POST", server.URL+"/payouts", strings.NewReader(`{"amount":10}`))
		req.Header.Set("Authorization", "Bearer token-1")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "payout-7f3a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), strings.TrimSpace(string(body)))
	}
	balance, _ := store.Value("balance/acc-1")
	fmt.Println("balance:", balance, "charges:", len(charges))
	// Output:
	// 503  provider unavailable
	// 201  {"charge":"ch_1"}
	// 201 true {"charge":"ch_1"}
	// balance: 90 charges: 1
}
