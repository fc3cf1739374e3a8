package idemprom_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemhttp/idemprom"
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
		r = r.WithContext(idemhttp.WithPrincipal(r.Context(), "user:42")) // done by your authentication
		r.Header.Set("Idempotency-Key", "order-1")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "idem_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				fmt.Printf("%s{outcome=%q} %g\n", mf.GetName(), m.GetLabel()[0].GetValue(), v)
			}
		}
	}
	// Output:
	// idem_http_requests_total{outcome="executed"} 1
	// idem_http_requests_total{outcome="replayed"} 2
}
