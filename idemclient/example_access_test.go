package idemclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/idemkit/idem/idemclient"
)

// bearer is a RoundTripper that adds the current access token to every
// attempt, so that a refreshed token reaches the next attempt of the same
// intent (and the token is never written to the journal).
type bearer struct {
	token *atomic.Value
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token.Load().(string))
	return b.next.RoundTrip(r)
}

// A 401 or 403 settles nothing: the intent stays pending, and once the
// credentials are fixed the same intent (the same key) is sent again.
func ExampleErrAccessDenied() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	var token atomic.Value
	token.Store("expired")
	client, err := idemclient.New(&idemclient.Config{
		HTTPClient: &http.Client{Transport: bearer{&token, http.DefaultTransport}},
	})
	if err != nil {
		panic(err)
	}
	in, _ := client.NewIntent(http.MethodPost, srv.URL+"/transfers", []byte(`{"amount":100}`))
	_, err = client.Do(context.Background(), in)
	fmt.Println("access denied:", errors.Is(err, idemclient.ErrAccessDenied), "rejected:", errors.Is(err, idemclient.ErrRejected))

	token.Store("fresh") // the application refreshes its token
	res, err := client.Do(context.Background(), in)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status)
	// Output:
	// access denied: true rejected: false
	// 201
}
