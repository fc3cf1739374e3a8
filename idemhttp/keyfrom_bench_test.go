package idemhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// BenchmarkKeyFrom compares a first execution whose key comes in
// Idempotency-Key with one whose key is a member of the JSON body
// (RouteOptions.KeyFrom.JSON), on the same bodies, over memstore: the
// difference is the pointer's decoding.
func BenchmarkKeyFrom(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts idemhttp.RouteOptions
		hdr  bool
	}{
		{"Header", idemhttp.RouteOptions{}, true},
		{"JSONPointer", idemhttp.RouteOptions{KeyFrom: idemhttp.KeySource{JSON: "/payment/reference"}}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := idem.New(memstore.New(), &idem.Config{ReplayCacheBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			mw, err := idemhttp.New(g, &idemhttp.Config{Anonymous: true})
			if err != nil {
				b.Fatal(err)
			}
			h := mw.Route(bc.opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
			}))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				key := fmt.Sprintf("ref-%d", i)
				body := `{"payment":{"amount":1250,"currency":"EUR","reference":"` + key + `","payee":{"iban":"DE89370400440532013000","name":"A. Payee"}},"note":"` + strings.Repeat("x", 64) + `"}`
				r := httptest.NewRequest("POST", "/pay", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				if bc.hdr {
					r.Header.Set("Idempotency-Key", key)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusCreated {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
