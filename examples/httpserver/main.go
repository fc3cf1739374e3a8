// Command httpserver is a small HTTP API whose POST /transfers is protected
// by idem. An authentication middleware establishes who is calling and
// hands that principal to idemhttp, which scopes every key by it; the key's
// record commits in the same SQLite transaction as the transfer.
//
//	go run ./examples/httpserver
//	curl -i localhost:8080/transfers -H 'Authorization: Bearer alice' \
//	    -H 'Idempotency-Key: t-1' -d '{"to":"bob","amount":100}'
//
// Send it twice: the answer is replayed (Idempotent-Replayed: true); alice pays once.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/sqlitestore"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "listen address")
	db := flag.String("db", "bank.db", "SQLite file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err == nil {
		err = run(ctx, ln, *db)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// run serves the API on ln until ctx is done.
func run(ctx context.Context, ln net.Listener, path string) error {
	store, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, `
		CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));
		INSERT OR IGNORE INTO accounts VALUES ('alice', 10000), ('bob', 0);`); err != nil {
		return err
	}
	guard, err := idem.New(store, nil) // records are kept 24 h
	if err != nil {
		return err
	}
	// Keys are scoped by the principal authenticate hands over; a request
	// without one would be refused, never put in a shared scope.
	mw, err := idemhttp.New(guard, nil)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /transfers", mw.Handler(http.HandlerFunc(transfer)))
	mux.HandleFunc("GET /balance", func(w http.ResponseWriter, r *http.Request) {
		var balance int64
		who, _ := idem.PrincipalFrom(r.Context())
		_ = store.DB().QueryRowContext(r.Context(), `SELECT balance FROM accounts WHERE id = ?`, who).Scan(&balance)
		fmt.Fprintf(w, "{\"balance\":%d}\n", balance)
	})
	srv := &http.Server{Handler: authenticate(mux), ReadHeaderTimeout: 5 * time.Second}
	context.AfterFunc(ctx, func() { _ = srv.Shutdown(context.Background()) })
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// authenticate establishes the principal before the idempotency layer runs
// (its refusals are never recorded). Here the bearer token is the user's
// name; a real service verifies a token and takes the user id from it.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || user == "" {
			http.Error(w, "send Authorization: Bearer <user>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(idem.WithPrincipal(r.Context(), user)))
	})
}

// transfer moves money from the caller to another account, in the
// transaction that records the key: a 2xx or 4xx commits with the key and
// is replayed to retries; a 5xx rolls everything back and records nothing.
func transfer(w http.ResponseWriter, r *http.Request) {
	var in struct {
		To     string `json:"to"`
		Amount int64  `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount <= 0 {
		http.Error(w, `want {"to": <account>, "amount": <positive cents>}`, http.StatusBadRequest)
		return
	}
	from, _ := idem.PrincipalFrom(r.Context())
	tx, _ := sqlitestore.TxFrom(r.Context())
	if status, refusal := pay(r.Context(), tx, from, in.To, in.Amount); status != http.StatusCreated {
		http.Error(w, refusal, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "{\"from\":%q,\"to\":%q,\"amount\":%d}\n", from, in.To, in.Amount)
}

// pay runs the transfer in tx; refusals come before any write (a 4xx commits).
func pay(ctx context.Context, tx *sql.Tx, from, to string, amount int64) (int, string) {
	var payee int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM accounts WHERE id = ? AND id <> ?`, to, from).Scan(&payee); err != nil {
		return http.StatusServiceUnavailable, "try again"
	}
	if payee == 0 {
		return http.StatusUnprocessableEntity, "no such account to pay"
	}
	res, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance >= ?`, amount, from, amount)
	if err != nil {
		return http.StatusServiceUnavailable, "try again"
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return http.StatusUnprocessableEntity, "insufficient funds"
	}
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + ? WHERE id = ?`, amount, to); err != nil {
		return http.StatusServiceUnavailable, "try again"
	}
	return http.StatusCreated, ""
}
