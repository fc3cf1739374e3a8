package idemwebhook_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemwebhook"
	"github.com/idemkit/idem/memstore"
)

// In leased mode the handler runs under a lease with its Run, once per
// delivery id; a redelivery is replayed; a 5xx releases the claim so the
// provider's retry runs it again.
func TestLeasedMode(t *testing.T) {
	store := memstore.New()
	g, _ := idem.New(store, nil)
	l, err := idem.NewLeased(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := idemwebhook.NewStandard(oldSecret)
	var runs, fail atomic.Int64
	h := idemwebhook.New(g, v, &idemwebhook.Config{Leased: l, Kind: "hooks"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := idem.RunFrom(r.Context()); !ok {
			t.Error("no Run in leased mode")
		}
		runs.Add(1)
		if fail.Load() == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "charged "+idemwebhook.DeliveryID(r))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	send := func() *http.Response {
		body := []byte(`{"n":1}`)
		req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
		_ = idemwebhook.StandardHeaders(req.Header, oldSecret, "msg_leased", time.Now(), body)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	fail.Store(1)
	if res := send(); res.StatusCode != 503 {
		t.Fatalf("5xx: %d", res.StatusCode)
	}
	fail.Store(0)
	if res := send(); res.StatusCode != 200 || res.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("retry: %d", res.StatusCode)
	}
	if res := send(); res.StatusCode != 200 || res.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("redelivery: %d", res.StatusCode)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("runs %d, want 2", n)
	}
}
