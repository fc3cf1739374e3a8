// Command quickstart shows idem on the embedded SQLite store: a transfer
// runs once, its retry is replayed, a concurrent duplicate is refused at
// once, and the same key with another body is rejected.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "idem-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "bank.db"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, `
		CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));
		INSERT INTO accounts VALUES ('alice', 10000), ('bob', 0);`); err != nil {
		return err
	}
	guard, err := idem.New(store, nil)
	if err != nil {
		return err
	}

	// POST /transfers {"from":"alice","to":"bob","amount":5000} with a key
	// the client made when the user pressed Confirm.
	body := `{"from":"alice","to":"bob","amount":5000}`
	req := idem.Request{
		Scope:       "user:alice",
		Key:         "2f1c7c9e-confirm-1",
		Fingerprint: idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: []byte(body), JSON: true}),
	}
	applied := 0
	var duplicate error
	transfer := func(ctx context.Context) (idem.Result, error) {
		applied++
		tx, _ := sqlitestore.TxFrom(ctx)
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - 5000 WHERE id = 'alice'`); err != nil {
			return idem.Result{}, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 5000 WHERE id = 'bob'`); err != nil {
			return idem.Result{}, err
		}
		if applied == 1 {
			// While this first attempt is still running, the client's
			// impatient retry arrives.
			_, _, duplicate = guard.Do(ctx, req, func(context.Context) (idem.Result, error) { return idem.Result{}, nil })
		}
		return idem.Result{Status: 201, Body: []byte(`{"id":"t-1","amount":5000}`)}, nil
	}

	res, replayed, err := guard.Do(ctx, req, transfer)
	fmt.Printf("1st attempt:            %d %s replayed=%v err=%v\n", res.Status, res.Body, replayed, err)
	fmt.Printf("duplicate in flight:    refused at once: %v\n", duplicate)

	res, replayed, err = guard.Do(ctx, req, transfer)
	fmt.Printf("retry after a timeout:  %d %s replayed=%v err=%v\n", res.Status, res.Body, replayed, err)

	other := req
	other.Fingerprint = idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: []byte(`{"from":"alice","to":"bob","amount":9000}`), JSON: true})
	_, _, err = guard.Do(ctx, other, transfer)
	mismatch := errors.Is(err, idem.ErrMismatch)
	fmt.Printf("same key, other body:   mismatch=%v\n", mismatch)

	var alice, bob int
	if err := store.DB().QueryRowContext(ctx, `SELECT (SELECT balance FROM accounts WHERE id='alice'), (SELECT balance FROM accounts WHERE id='bob')`).Scan(&alice, &bob); err != nil {
		return err
	}
	fmt.Printf("transfer applied %d time(s); balances: alice=%d bob=%d\n", applied, alice, bob)
	if applied != 1 || alice != 5000 || bob != 5000 {
		return errors.New("the transfer was not applied exactly once")
	}
	if !mismatch {
		return errors.New("the same key with another body was not rejected")
	}
	if !errors.Is(duplicate, idem.ErrInFlight) {
		return fmt.Errorf("the concurrent duplicate was not refused: %v", duplicate)
	}
	return nil
}
