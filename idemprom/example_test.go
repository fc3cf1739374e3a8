package idemprom_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
	"github.com/prometheus/client_golang/prometheus"
)

func Example() {
	reg := prometheus.NewRegistry() // prometheus.DefaultRegisterer in a server
	obs, err := idemprom.New(reg, nil)
	if err != nil {
		panic(err)
	}
	guard, _ := idem.New(memstore.New(), nil)
	mw, _ := idemhttp.New(guard, &idemhttp.Config{Observer: obs})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	for range 3 {
		r := httptest.NewRequest("POST", "/orders", nil)
		r = r.WithContext(idem.WithPrincipal(r.Context(), "user:42")) // done by your authentication
		r.Header.Set("Idempotency-Key", "order-1")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "idem_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				l := m.GetLabel() // sorted by name: outcome, transport
				fmt.Printf("%s{outcome=%q,transport=%q} %g\n", mf.GetName(), l[0].GetValue(), l[1].GetValue(), v)
			}
		}
	}
	// Output:
	// idem_requests_total{outcome="executed",transport="http"} 1
	// idem_requests_total{outcome="replayed",transport="http"} 2
}
