package idemtest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/memstore"
)

// newTransfers is a small transfer service: authentication hands idemhttp
// the principal, and the handler's effect commits with the key. The
// counter it returns counts transfers made.
func newTransfers() (http.Handler, *atomic.Int64) {
	guard, err := idem.New(memstore.New(), nil) // sqlitestore or pgstore in production
	if err != nil {
		panic(err)
	}
	mw, err := idemhttp.New(guard, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	var transfers atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("POST /transfers", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := memstore.TxFrom(r.Context())
		n := transfers.Add(1) // a real effect goes through tx, and commits with the key
		tx.Set(fmt.Sprintf("transfer/%d", n), "made")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/transfers/%d", n))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, n)
	})))
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || user == "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r.WithContext(idem.WithPrincipal(r.Context(), "user:"+user)))
	})
	return auth, &transfers
}

// Audit a handler's duplicate path in process. In a test, call
// idemtest.Check(t, h, endpoint) instead: it reports each failed rule
// with t.Errorf.
func ExampleRun() {
	h, transfers := newTransfers()
	rep, err := idemtest.Run(context.Background(), h, idemtest.Endpoint{
		Path:       "/transfers",
		Body:       `{"to":"bob","amount":10}`,
		Header:     http.Header{"Authorization": {"Bearer alice"}},
		Principal2: http.Header{"Authorization": {"Bearer bob"}},
		Effects:    func() (int, error) { return int(transfers.Load()), nil },
	})
	if err != nil {
		panic(err)
	}
	for _, res := range rep.Results {
		fmt.Printf("%d %-15s %s\n", res.Rule, res.Name, res.Status)
	}
	fmt.Println(rep.Fail, "failed;", rep.EffectsCaused, "transfers made")
	// Output:
	// 1 retry           PASS
	// 2 concurrent      PASS
	// 3 different-body  PASS
	// 4 reordered-json  PASS
	// 5 missing-key     PASS
	// 6 malformed-key   PASS
	// 7 other-principal PASS
	// 8 no-key-twice    PASS
	// 0 failed; 7 transfers made
}
