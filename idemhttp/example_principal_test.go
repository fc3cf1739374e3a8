package idemhttp_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// authenticate is an authentication middleware that runs before idemhttp:
// it checks the bearer token and hands the principal it names to the
// middleware, which scopes keys by it. A refreshed token of the same user
// names the same principal, so a retry sent with it is still a replay.
func authenticate(users map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		user, ok := users[token]
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized) // never recorded
			return
		}
		ctx := idem.WithPrincipal(r.Context(), user)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Keys are scoped by the principal that authentication established: Ann's
// retry with a refreshed token is a replay, and Bob's request with the
// same key is his own.
func ExampleWithPrincipal() {
	guard, _ := idem.New(memstore.New(), nil)
	mw, _ := idemhttp.New(guard, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler)})
	runs := 0
	orders := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d", runs)
	}))
	users := map[string]string{"ann-1": "user:ann", "ann-2": "user:ann", "bob-1": "user:bob"}
	server := authenticate(users, orders)

	for _, token := range []string{"ann-1", "ann-2", "bob-1"} {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"sku":"A1"}`))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Idempotency-Key", "order-1001")
		w := httptest.NewRecorder()
		server.ServeHTTP(w, r)
		fmt.Printf("%s: %d %s (replayed: %t)\n", token, w.Code, w.Body, w.Header().Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// ann-1: 201 order 1 (replayed: false)
	// ann-2: 201 order 1 (replayed: true)
	// bob-1: 201 order 2 (replayed: false)
}
