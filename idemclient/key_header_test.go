package idemclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemclient"
	"github.com/idemkit/idem/memstore"
)

// TestDoKeyQuotingMatchesServer checks that the client and an idemhttp
// server share one rule for quoting the key (rule K3): keys that start with
// a character opening another structured-field type (?, :, @, () or that
// hold one that carries structure reach the real middleware unchanged and
// run, where a bare ?1 would be refused with 400.
func TestDoKeyQuotingMatchesServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newIdemHandler(t, memstore.New()))
	t.Cleanup(srv.Close)
	for _, key := range []string{"?1", ":YWJj:", "@1700000000", "(a)", `a"b`, `a\b`, "a,b", "a;b", "plain-key"} {
		for _, quote := range []bool{false, true} {
			c, err := idemclient.New(&idemclient.Config{
				HTTPClient:  srv.Client(),
				NewKey:      func() string { return key },
				QuoteKey:    quote,
				MaxAttempts: 1,
				Logger:      discardLogger,
			})
			if err != nil {
				t.Fatal(err)
			}
			in, err := c.NewIntent(http.MethodPost, srv.URL+"/transfers", []byte(`{"amount":1}`))
			if err != nil {
				t.Fatal(err)
			}
			in.Header.Set("Content-Type", "application/json")
			in.Header.Set("X-Intent", key)
			res, err := c.Do(context.Background(), in)
			if err != nil {
				t.Errorf("key %q (QuoteKey %v): got %v, want 201", key, quote, err)
				continue
			}
			if got, want := res.Status, http.StatusCreated; got != want {
				t.Errorf("key %q (QuoteKey %v): status %d, want %d", key, quote, got, want)
			}
			// The second run replays: the server saw the same key.
			if !quote != !res.Replayed {
				t.Errorf("key %q (QuoteKey %v): Replayed %v, want %v (the bare and quoted forms name one key)", key, quote, res.Replayed, quote)
			}
		}
	}
	if got, err := idem.ParseKey("?1"); err == nil {
		t.Fatalf("ParseKey(?1) = %q, nil; the test relies on the server refusing a bare ?1", got)
	}
}
