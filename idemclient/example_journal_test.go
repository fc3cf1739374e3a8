package idemclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"

	"github.com/idemkit/idem/idemclient"
)

// With a journal, an intent is on disk before its first attempt. One the
// client could not finish (here the server is down; after a crash it would
// be the same) is resumed later with its original key.
func ExampleClient_Resume() {
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	dir, err := os.MkdirTemp("", "intents")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	journal, err := idemclient.OpenDirJournal(dir)
	if err != nil {
		panic(err)
	}
	client, err := idemclient.New(&idemclient.Config{Journal: journal, MaxAttempts: 2})
	if err != nil {
		panic(err)
	}

	in, _ := client.NewIntent(http.MethodPost, srv.URL+"/transfers", []byte(`{"amount":100}`))
	_, err = client.Do(context.Background(), in)
	fmt.Println("first try exhausted:", errors.Is(err, idemclient.ErrExhausted))

	// Later, or in the next run of the program.
	up.Store(true)
	results, err := client.Resume(context.Background())
	if err != nil {
		panic(err)
	}
	for _, o := range results {
		fmt.Println("resumed:", o.Response.Status, "same key:", o.Intent.Key == in.Key)
	}
	pending, _ := journal.Pending(context.Background())
	fmt.Println("pending:", len(pending))
	// Output:
	// first try exhausted: true
	// resumed: 201 same key: true
	// pending: 0
}
