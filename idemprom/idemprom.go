// Package idemprom exports the outcomes of idem's transports (idemhttp,
// idemgrpc) as Prometheus metrics. It is the only idem package that imports
// the Prometheus client, so that the transports themselves stay on the
// standard library and gRPC.
//
//	obs, err := idemprom.New(prometheus.DefaultRegisterer, nil)
//	...
//	mw, err := idemhttp.New(guard, &idemhttp.Config{Observer: obs})
//	interceptor, err := idemgrpc.New(guard, &idemgrpc.Config{Methods: methods, Observer: obs})
//
// One Observer serves both transports; every series carries a transport
// label ("http" or "grpc", idem.Transport), so the two are told apart. Two
// metrics are labelled by transport and outcome only (never by route or key,
// which would make the number of series unbounded):
//
//   - idem_requests_total: a counter of protected requests and calls;
//   - idem_request_duration_seconds: a histogram of their latency, from
//     arrival in the transport to the answer.
//
// Every series exists from the start, at zero, for both transports. Three
// counters, labelled by transport, say what the Guard answered without a
// store call (docs/DESIGN.md#in-process):
//
//   - idem_replay_cache_hits_total: answered from the Guard's replay
//     cache (a replay, or a mismatch);
//   - idem_replay_cache_misses_total: looked there and went on to the
//     store;
//   - idem_in_flight_local_total: duplicates refused in flight because
//     this process was running their key.
package idemprom

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures an Observer. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Namespace prefixes the metric names. Defaults to "idem".
	Namespace string

	// Buckets are the latency histogram's upper bounds, in seconds, in
	// increasing order. Defaults to prometheus.DefBuckets.
	Buckets []float64

	// ConstLabels are added to every metric, for example to tell two
	// services apart. Defaults to none.
	ConstLabels prometheus.Labels
}

// transports are the transports whose series exist from the start.
var transports = []idem.Transport{idem.TransportHTTP, idem.TransportGRPC}

// Observer is an idem.Observer that updates Prometheus metrics.
type Observer struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	cacheHits, cacheMisses, localInFlight *prometheus.CounterVec
}

var _ idem.Observer = (*Observer)(nil)

// New creates the metrics, registers them with reg (unless reg is nil) and
// returns the Observer that updates them.
func New(reg prometheus.Registerer, cfg *Config) (*Observer, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Namespace == "" {
		c.Namespace = "idem"
	}
	if c.Buckets == nil {
		c.Buckets = prometheus.DefBuckets
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	o := &Observer{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   c.Namespace,
			Name:        "requests_total",
			Help:        "Protected requests and calls, by transport and outcome.",
			ConstLabels: c.ConstLabels,
		}, []string{"transport", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace:   c.Namespace,
			Name:        "request_duration_seconds",
			Help:        "Time from a protected request's arrival in the transport to its answer, by transport and outcome.",
			Buckets:     c.Buckets,
			ConstLabels: c.ConstLabels,
		}, []string{"transport", "outcome"}),
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: c.Namespace, Name: name, Help: help, ConstLabels: c.ConstLabels,
		}, []string{"transport"})
	}
	o.cacheHits = counter("replay_cache_hits_total", "Protected requests the Guard answered from its replay cache, without a store call, by transport.")
	o.cacheMisses = counter("replay_cache_misses_total", "Protected requests the Guard looked up in its replay cache and sent on to the store, by transport.")
	o.localInFlight = counter("in_flight_local_total", "Duplicates refused in flight because this process was running their key, without a store call, by transport.")
	for _, tr := range transports {
		for _, out := range idem.Outcomes() {
			o.requests.WithLabelValues(string(tr), string(out))
			o.duration.WithLabelValues(string(tr), string(out))
		}
		o.cacheHits.WithLabelValues(string(tr))
		o.cacheMisses.WithLabelValues(string(tr))
		o.localInFlight.WithLabelValues(string(tr))
	}
	if reg != nil {
		cs := o.Collectors()
		for i, col := range cs {
			if err := reg.Register(col); err != nil {
				for _, done := range cs[:i] {
					reg.Unregister(done)
				}
				return nil, fmt.Errorf("idemprom: register: %w", err)
			}
		}
	}
	return o, nil
}

func (c *Config) validate() error {
	if len(c.Buckets) == 0 {
		return errors.New("idemprom: Config.Buckets is empty; leave it nil for the default")
	}
	for i := 1; i < len(c.Buckets); i++ {
		if c.Buckets[i] <= c.Buckets[i-1] {
			return fmt.Errorf("idemprom: Config.Buckets must be in increasing order, got %v", c.Buckets)
		}
	}
	return nil
}

// Observe implements idem.Observer. An event without a transport counts
// as HTTP's.
func (o *Observer) Observe(_ context.Context, e idem.Event) {
	tr := string(e.Transport)
	if tr == "" {
		tr = string(idem.TransportHTTP)
	}
	out := string(e.Outcome)
	o.requests.WithLabelValues(tr, out).Inc()
	o.duration.WithLabelValues(tr, out).Observe(e.Duration.Seconds())
	switch e.ReplayCache {
	case idem.CacheHit:
		o.cacheHits.WithLabelValues(tr).Inc()
	case idem.CacheMiss:
		o.cacheMisses.WithLabelValues(tr).Inc()
	}
	if e.LocalInFlight {
		o.localInFlight.WithLabelValues(tr).Inc()
	}
}

// Collectors returns the Observer's metrics, for registering them
// elsewhere when New was given a nil Registerer.
func (o *Observer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{o.requests, o.duration, o.cacheHits, o.cacheMisses, o.localInFlight}
}
