package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// Call runs a function once per key and returns its typed result; a retry
// gets the recorded result back, decoded, and the function does not run.
// The input's fingerprint makes a reused key with other arguments a
// mismatch.
func ExampleCall() {
	type Refund struct {
		Order  string `json:"order"`
		Cents  int    `json:"cents"`
		Refund string `json:"refund"`
	}
	guard, _ := idem.New(memstore.New(), nil)
	runs := 0
	refund := func(order string, cents int) func(context.Context) (Refund, error) {
		return func(ctx context.Context) (Refund, error) {
			runs++
			tx, _ := memstore.TxFrom(ctx) // the effect goes in the store's transaction
			tx.Set("refund:"+order, fmt.Sprint(cents))
			return Refund{Order: order, Cents: cents, Refund: fmt.Sprintf("rf_%d", runs)}, nil
		}
	}
	call := func(key, order string, cents int) {
		fp, _ := idem.InputFingerprint("refund", map[string]any{"order": order, "cents": cents})
		req := idem.Request{Scope: "shop-1", Key: key, Fingerprint: fp}
		r, replayed, err := idem.Call(context.Background(), guard, req, refund(order, cents))
		if errors.Is(err, idem.ErrMismatch) {
			fmt.Println("refused:", err)
			return
		}
		fmt.Printf("%+v replayed=%v\n", r, replayed)
	}

	call("k-1", "o-7", 500)
	call("k-1", "o-7", 500)
	call("k-1", "o-7", 900)
	fmt.Println("runs:", runs)
	// Output:
	// {Order:o-7 Cents:500 Refund:rf_1} replayed=false
	// {Order:o-7 Cents:500 Refund:rf_1} replayed=true
	// refused: idem: key reused with a different request
	// runs: 1
}
