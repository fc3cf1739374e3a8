package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// A retry of a completed key replays the recorded result; the work runs once.
func ExampleGuard_Do() {
	store := memstore.New()
	guard, _ := idem.New(store, nil)
	runs := 0
	work := func(ctx context.Context) (idem.Result, error) {
		runs++
		tx, _ := memstore.TxFrom(ctx) // the store's transaction: write the effect here
		tx.Set("transfer:42", "applied")
		return idem.Result{Status: 201, Body: []byte(`{"id":42}`)}, nil
	}
	req := idem.Request{Scope: "alice", Key: "8e03978e", Fingerprint: "v1:abc"}

	for range 2 {
		res, replayed, err := guard.Do(context.Background(), req, work)
		fmt.Println(res.Status, string(res.Body), replayed, err)
	}
	fmt.Println("runs:", runs)
	// Output:
	// 201 {"id":42} false <nil>
	// 201 {"id":42} true <nil>
	// runs: 1
}

// The same key with a different request is rejected, never replayed.
func ExampleErrMismatch() {
	guard, _ := idem.New(memstore.New(), nil)
	work := func(ctx context.Context) (idem.Result, error) { return idem.Result{Status: 201}, nil }
	fp := func(body string) string {
		return idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: []byte(body), JSON: true})
	}

	_, _, err := guard.Do(context.Background(), idem.Request{Key: "k", Fingerprint: fp(`{"amount":100}`)}, work)
	fmt.Println(err)
	_, _, err = guard.Do(context.Background(), idem.Request{Key: "k", Fingerprint: fp(`{ "amount" : 100 }`)}, work)
	fmt.Println(err)
	_, _, err = guard.Do(context.Background(), idem.Request{Key: "k", Fingerprint: fp(`{"amount":900}`)}, work)
	fmt.Println(errors.Is(err, idem.ErrMismatch))
	// Output:
	// <nil>
	// <nil>
	// true
}

// A second call while the first is still running is refused at once.
func ExampleInFlightError() {
	guard, _ := idem.New(memstore.New(), nil)
	req := idem.Request{Key: "k"}
	_, _, _ = guard.Do(context.Background(), req, func(ctx context.Context) (idem.Result, error) {
		_, _, err := guard.Do(ctx, req, func(context.Context) (idem.Result, error) { return idem.Result{}, nil }) // a concurrent duplicate
		var ife *idem.InFlightError
		fmt.Println(errors.As(err, &ife), ife.RetryAfter)
		return idem.Result{}, nil
	})
	// Output:
	// true 1s
}

func ExampleParseKey() {
	for _, field := range []string{`"abc"`, `abc`, `"a", "b"`, ``} {
		key, err := idem.ParseKey(field)
		fmt.Printf("%-10q %q %v\n", field, key, errors.Is(err, idem.ErrInvalidKey))
	}
	// Output:
	// "\"abc\""  "abc" false
	// "abc"      "abc" false
	// "\"a\", \"b\"" "" true
	// ""         "" true
}

func ExampleCanonicalJSON() {
	c, _ := idem.CanonicalJSON([]byte(`{ "to": 2, "from": 1, "note": "caf\u00e9" }`))
	fmt.Println(string(c))
	// Output:
	// {"from":1,"note":"café","to":2}
}

// A scope is stored as it is when it is short, printable UTF-8; anything
// else (a long token, raw bytes) is stored as a digest. Tools that look a
// record up by its scope apply the same mapping.
func ExampleStoredScope() {
	fmt.Println(idem.StoredScope("user:42"))
	fmt.Println(idem.StoredScope("Bearer \xff\xfe"))
	// Output:
	// user:42
	// idem:sha256:a7ec41e26afadbac5c84c30c7fbcf6abc671f27d28f5e3c8d2695f66a35ea715
}
