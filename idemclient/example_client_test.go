package idemclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/idemkit/idem/idemclient"
)

// The intent is made once, when the user confirms; Do retries it (here past
// one 503) with the same key and body until it has an answer.
func Example() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"transfer":"t-1"}`)
	}))
	defer srv.Close()

	client, err := idemclient.New(nil)
	if err != nil {
		panic(err)
	}
	// The user pressed Confirm: this is the one moment a key is made.
	in, err := client.NewIntent(http.MethodPost, srv.URL+"/transfers", []byte(`{"from":"a","to":"b","amount":100}`))
	if err != nil {
		panic(err)
	}
	in.Header.Set("Content-Type", "application/json")

	res, err := client.Do(context.Background(), in)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, string(res.Body))
	fmt.Println("attempts:", res.Attempts, "replayed:", res.Replayed)
	// Output:
	// 201 {"transfer":"t-1"}
	// attempts: 2 replayed: false
}

// A 4xx is an answer, not a failure to retry: it comes back at once as a
// *ProblemError with the server's problem details.
func ExampleProblemError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"type":"https://idemkit.dev/problems/key-reused","title":"Idempotency key reused","status":422,"detail":"the key was used with another request"}`)
	}))
	defer srv.Close()

	client, _ := idemclient.New(nil)
	in, _ := client.NewIntent(http.MethodPost, srv.URL+"/transfers", []byte(`{}`))
	_, err := client.Do(context.Background(), in)

	var pe *idemclient.ProblemError
	if errors.As(err, &pe) {
		fmt.Println(pe.Status, pe.Problem.Title)
		fmt.Println(pe.Problem.Type)
		fmt.Println("attempts:", pe.Attempts, "rejected:", errors.Is(err, idemclient.ErrRejected))
	}
	// Output:
	// 422 Idempotency key reused
	// https://idemkit.dev/problems/key-reused
	// attempts: 1 rejected: true
}
