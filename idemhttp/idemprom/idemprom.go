// Package idemprom exports idemhttp's outcomes as Prometheus metrics. It is
// the only idem package that imports the Prometheus client, so that
// idemhttp itself stays on the standard library.
//
//	obs, err := idemprom.New(prometheus.DefaultRegisterer, nil)
//	...
//	mw, err := idemhttp.New(guard, &idemhttp.Config{Observer: obs})
//
// Two metrics are labelled by outcome only (never by route or key, which
// would make the number of series unbounded):
//
//   - idem_http_requests_total: a counter of protected requests;
//   - idem_http_request_duration_seconds: a histogram of their latency, from
//     arrival in the middleware to the answer.
//
// Every outcome's series exists from the start, at zero. Three counters,
// without labels, say what the Guard answered without a store call
// (docs/DESIGN.md#in-process):
//
//   - idem_http_replay_cache_hits_total: requests answered from the
//     Guard's replay cache (a replay, or a mismatch);
//   - idem_http_replay_cache_misses_total: requests that looked there and
//     went on to the store;
//   - idem_http_in_flight_local_total: duplicates refused in flight
//     because this process was running their key.
package idemprom

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
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

	// ConstLabels are added to both metrics, for example to tell two
	// middlewares apart. Defaults to none.
	ConstLabels prometheus.Labels
}

// Observer is an idemhttp.Observer that updates Prometheus metrics.
type Observer struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	cacheHits, cacheMisses, localInFlight prometheus.Counter
}

var _ idemhttp.Observer = (*Observer)(nil)

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
			Subsystem:   "http",
			Name:        "requests_total",
			Help:        "Requests seen by the idempotency middleware, by outcome.",
			ConstLabels: c.ConstLabels,
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace:   c.Namespace,
			Subsystem:   "http",
			Name:        "request_duration_seconds",
			Help:        "Time from a request's arrival in the idempotency middleware to its answer, by outcome.",
			Buckets:     c.Buckets,
			ConstLabels: c.ConstLabels,
		}, []string{"outcome"}),
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: c.Namespace, Subsystem: "http", Name: name, Help: help, ConstLabels: c.ConstLabels,
		})
	}
	o.cacheHits = counter("replay_cache_hits_total", "Protected requests the Guard answered from its replay cache, without a store call.")
	o.cacheMisses = counter("replay_cache_misses_total", "Protected requests the Guard looked up in its replay cache and sent on to the store.")
	o.localInFlight = counter("in_flight_local_total", "Duplicates refused in flight because this process was running their key, without a store call.")
	for _, out := range idemhttp.Outcomes() {
		o.requests.WithLabelValues(string(out))
		o.duration.WithLabelValues(string(out))
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

// Observe implements idemhttp.Observer.
func (o *Observer) Observe(_ context.Context, e idemhttp.Event) {
	label := string(e.Outcome)
	o.requests.WithLabelValues(label).Inc()
	o.duration.WithLabelValues(label).Observe(e.Duration.Seconds())
	switch e.ReplayCache {
	case idem.CacheHit:
		o.cacheHits.Inc()
	case idem.CacheMiss:
		o.cacheMisses.Inc()
	}
	if e.LocalInFlight {
		o.localInFlight.Inc()
	}
}

// Collectors returns the Observer's metrics, for registering them
// elsewhere when New was given a nil Registerer.
func (o *Observer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{o.requests, o.duration, o.cacheHits, o.cacheMisses, o.localInFlight}
}
