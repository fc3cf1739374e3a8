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

// A transfer endpoint protected by the middleware: the first request runs
// the handler, whose effect goes through the store's transaction; the retry
// gets the same response back without running it again.
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

	send := func(body string) {
		r := httptest.NewRequest("POST", "/transfers", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8"`)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Body)
		fmt.Println(w.Code, w.Header().Get("Location"), w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(string(b)))
	}
	send(`{"to":"bob","amount":10}`)
	send(`{"amount": 10, "to": "bob"}`) // the same request: replayed
	send(`{"to":"bob","amount":99}`)    // the same key, another request
	fmt.Println("transfers:", transfers)
	// Output:
	// 201 /transfers/1  {"id":1}
	// 201 /transfers/1 true {"id":1}
	// 422   {"type":"https://idemkit.dev/problems/key-reused","title":"Idempotency-Key was used with a different request","status":422,"detail":"This key was already used with a different request. Use a new key for a new request."}
	// transfers: 1
}

// Per-route policy: a required key, an optional one, and a route where a
// duplicate is harmless enough to run unprotected when the store is down.
func ExampleMiddleware_Route() {
	guard, _ := idem.New(memstore.New(), nil)
	mw, _ := idemhttp.New(guard, nil)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })

	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(ok))
	mux.Handle("POST /comments", mw.Optional(ok))
	mux.Handle("POST /likes", mw.Route(idemhttp.RouteOptions{Optional: true, FailOpen: true})(ok))

	for _, path := range []string{"/payments", "/comments", "/likes"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("POST", path, nil)) // no key
		fmt.Println(path, w.Code)
	}
	// Output:
	// /payments 400
	// /comments 204
	// /likes 204
}

// A scope from the principal that authentication established, instead of
// the default hash of the credentials.
func ExampleConfig_scope() {
	type principalKey struct{}
	cfg := &idemhttp.Config{
		Scope: func(r *http.Request) (string, error) {
			user, ok := r.Context().Value(principalKey{}).(string)
			if !ok {
				return "", fmt.Errorf("no principal: is authentication outside the middleware?")
			}
			return "user:" + user, nil
		},
	}
	guard, _ := idem.New(memstore.New(), nil)
	_, err := idemhttp.New(guard, cfg)
	fmt.Println(err)
	// Output:
	// <nil>
}
