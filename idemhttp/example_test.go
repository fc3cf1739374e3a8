package idemhttp_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// A transfer endpoint protected by the middleware, behind authentication
// that hands it the principal: the first request runs the handler, whose
// effect goes through the store's transaction; the retry, sent with a
// refreshed token of the same user, gets the same response back without
// running it again.
func Example() {
	store := memstore.New() // sqlitestore or pgstore in production
	guard, err := idem.New(store, nil)
	if err != nil {
		panic(err)
	}
	mw, err := idemhttp.New(guard, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}

	transfers := 0
	mux := http.NewServeMux()
	mux.Handle("POST /transfers", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := memstore.TxFrom(r.Context()) // sqlitestore.TxFrom gives a *sql.Tx
		transfers++
		tx.Set(fmt.Sprintf("transfer/%d", transfers), "10 EUR to bob")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/transfers/%d", transfers))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, transfers)
	})))
	users := map[string]string{"token-1": "user:42", "token-2": "user:42"} // token-2 is token-1 refreshed
	server := authenticate(users, mux)

	send := func(token, body string) {
		r := httptest.NewRequest("POST", "/transfers", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8"`)
		w := httptest.NewRecorder()
		server.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Body)
		fmt.Println(w.Code, w.Header().Get("Location"), w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(string(b)))
	}
	send("token-1", `{"to":"bob","amount":10}`)
	send("token-2", `{"amount": 10, "to": "bob"}`) // the same request: replayed
	send("token-2", `{"to":"bob","amount":99}`)    // the same key, another request
	fmt.Println("transfers:", transfers)
	// Output:
	// 201 /transfers/1  {"id":1}
	// 201 /transfers/1 true {"id":1}
	// 422   {"type":"https://idemkit.dev/problems/key-reused","title":"Idempotency-Key was used with a different request","status":422,"detail":"This key was already used with a different request. Use a new key for a new request."}
	// transfers: 1
}

// Per-route policy: a required key, an optional one, a route where a
// duplicate is harmless enough to run unprotected when the store is down,
// and a public route whose anonymous callers share one scope.
func ExampleMiddleware_Route() {
	guard, _ := idem.New(memstore.New(), nil)
	mw, _ := idemhttp.New(guard, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler)})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })

	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(ok))
	mux.Handle("POST /comments", mw.Optional(ok))
	mux.Handle("POST /likes", mw.Route(idemhttp.RouteOptions{Optional: true, FailOpen: true})(ok))
	mux.Handle("POST /signups", mw.Route(idemhttp.RouteOptions{Anonymous: true})(ok)) // random keys only

	for _, path := range []string{"/payments", "/comments", "/likes"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("POST", path, nil)) // no key
		fmt.Println(path, "without a key:", w.Code)
	}
	for _, path := range []string{"/payments", "/signups"} {
		r := httptest.NewRequest("POST", path, nil) // no principal
		r.Header.Set("Idempotency-Key", "0b6e5c1e-8f0a-4d0e-9a43-5f7f0c1d2e3a")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(path, "without a principal:", w.Code)
	}
	// Output:
	// /payments without a key: 400
	// /comments without a key: 204
	// /likes without a key: 204
	// /payments without a principal: 500
	// /signups without a principal: 204
}

// A scope set by a trusted gateway in a header (which it strips from
// client requests), for a service that has no authentication of its own.
// The body is readable here, if the scope has to come from it.
func ExampleConfig_scope() {
	cfg := &idemhttp.Config{
		Scope: func(r *http.Request) (string, error) {
			tenant := r.Header.Get("X-Gateway-Tenant")
			if tenant == "" {
				return "", idem.ErrNoPrincipal
			}
			return "tenant:" + tenant, nil
		},
	}
	guard, _ := idem.New(memstore.New(), nil)
	_, err := idemhttp.New(guard, cfg)
	fmt.Println(err)
	// Output:
	// <nil>
}
