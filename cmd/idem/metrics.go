package main

import (
	"github.com/idemkit/idem/idemhttp/idemprom"
	"github.com/idemkit/idem/internal/transfers"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// setupMetrics registers idem's outcome metrics and the Go runtime's on a
// registry of the server's own and serves them at GET /metrics.
func setupMetrics(cfg *transfers.Config) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs, err := idemprom.New(reg, nil)
	if err != nil {
		return err
	}
	cfg.Observer = obs
	cfg.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return nil
}
