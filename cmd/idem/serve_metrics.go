package main

import (
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/inbox"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// setupMetrics registers idem's outcome metrics, the Go runtime's and,
// when pool is not nil, the PostgreSQL pool's on a registry of the
// server's own, serves them at GET /metrics and returns the registry.
func setupMetrics(cfg *transfers.Config, pool *pgxpool.Pool) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pool != nil {
		reg.MustRegister(poolCollector{pool})
	}
	obs, err := idemprom.New(reg, nil)
	if err != nil {
		return nil, err
	}
	cfg.Observer = obs
	if cfg.WebhookObserver, err = idemprom.NewWebhooks(reg, nil, "standard"); err != nil {
		return nil, err
	}
	cfg.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return reg, nil
}

// inboxMetrics registers idem_inbox_messages_total{consumer,outcome}, the
// count of messages the inbox processed by outcome, with every outcome's
// series at zero from the start, and returns the inbox Observer that
// counts them. A growing retry or dead_letter count says messages are
// failing; refused counts the commands the ledger refused for good
// (malformed, unknown account, insufficient funds).
func inboxMetrics(reg prometheus.Registerer, consumer string) func(inbox.Event) {
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "idem",
		Subsystem: "inbox",
		Name:      "messages_total",
		Help:      "Messages processed by the inbox, by consumer and outcome.",
	}, []string{"consumer", "outcome"})
	reg.MustRegister(messages)
	for _, o := range inbox.Outcomes() {
		messages.WithLabelValues(consumer, string(o))
	}
	return func(e inbox.Event) { messages.WithLabelValues(e.Consumer, string(e.Outcome)).Inc() }
}

// poolCollector exports pgxpool's statistics. A growing
// idem_pgxpool_empty_acquire_total, with acquired connections at the
// maximum, says requests are queueing for a connection: -pool is too
// small for the load (or the database too slow for it).
type poolCollector struct{ pool *pgxpool.Pool }

var (
	poolMaxConns      = prometheus.NewDesc("idem_pgxpool_max_conns", "Largest size of the PostgreSQL pool (-pool).", nil, nil)
	poolTotalConns    = prometheus.NewDesc("idem_pgxpool_total_conns", "Connections open in the pool.", nil, nil)
	poolAcquiredConns = prometheus.NewDesc("idem_pgxpool_acquired_conns", "Connections in use.", nil, nil)
	poolIdleConns     = prometheus.NewDesc("idem_pgxpool_idle_conns", "Connections idle in the pool.", nil, nil)
	poolAcquires      = prometheus.NewDesc("idem_pgxpool_acquire_total", "Connections acquired from the pool.", nil, nil)
	poolEmptyAcquires = prometheus.NewDesc("idem_pgxpool_empty_acquire_total", "Acquires that had to wait because no connection was idle.", nil, nil)
	poolAcquireWait   = prometheus.NewDesc("idem_pgxpool_acquire_wait_seconds_total", "Time spent waiting for a connection when none was idle.", nil, nil)
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolMaxConns, poolTotalConns, poolAcquiredConns, poolIdleConns, poolAcquires, poolEmptyAcquires, poolAcquireWait} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(poolMaxConns, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(poolTotalConns, prometheus.GaugeValue, float64(s.TotalConns()))
	ch <- prometheus.MustNewConstMetric(poolAcquiredConns, prometheus.GaugeValue, float64(s.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(poolIdleConns, prometheus.GaugeValue, float64(s.IdleConns()))
	ch <- prometheus.MustNewConstMetric(poolAcquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolEmptyAcquires, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolAcquireWait, prometheus.CounterValue, s.EmptyAcquireWaitTime().Seconds())
}

// completerMetrics are the completer's series:
//
//   - idem_completer_records_total{kind,outcome}: abandoned records a pass
//     handled, by outcome (completed, failed, skipped, unknown-kind,
//     unavailable). A growing failed count says the provider gives no
//     definitive answer, or the store fails;
//   - idem_completer_stuck_total{kind}: attempts on records found pending
//     past -report-after (each also logged at ERROR as needing a human;
//     the completer keeps trying them). Alert when it grows;
//   - idem_completer_passes_total{result}: passes, ok or failed (the store
//     could not list the abandoned records).
type completerMetrics struct {
	records *prometheus.CounterVec
	stuck   *prometheus.CounterVec
	passes  *prometheus.CounterVec
}

func newCompleterMetrics(reg prometheus.Registerer, kinds ...string) *completerMetrics {
	m := &completerMetrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "idem", Subsystem: "completer", Name: "records_total",
			Help: "Abandoned leased records handled by the completer, by kind and outcome.",
		}, []string{"kind", "outcome"}),
		stuck: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "idem", Subsystem: "completer", Name: "stuck_total",
			Help: "Completer attempts on records pending past -report-after, by kind: they need a human.",
		}, []string{"kind"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "idem", Subsystem: "completer", Name: "passes_total",
			Help: "Completer passes, by result (ok, or failed: the store could not list the abandoned records).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.records, m.stuck, m.passes)
	for _, k := range kinds {
		m.stuck.WithLabelValues(k)
		for _, o := range []string{idem.CompleterCompleted, idem.CompleterFailed, idem.CompleterSkipped, idem.CompleterUnknownKind, idem.CompleterUnavailable} {
			m.records.WithLabelValues(k, o)
		}
	}
	m.passes.WithLabelValues("ok")
	m.passes.WithLabelValues("failed")
	return m
}

func (m *completerMetrics) observe(e idem.CompleterEvent) {
	m.records.WithLabelValues(e.Kind, e.Outcome).Inc()
	if e.Stuck {
		m.stuck.WithLabelValues(e.Kind).Inc()
	}
}

func (m *completerMetrics) pass(ok bool) {
	if ok {
		m.passes.WithLabelValues("ok").Inc()
	} else {
		m.passes.WithLabelValues("failed").Inc()
	}
}
