package idemprom

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem/outbox"
)

// OutboxCollector exports an outbox.Relay's metrics (docs/OUTBOX.md,
// Metrics), read at each scrape:
//
//   - idem_outbox_staged_total: messages outbox.Stage wrote in this
//     process (rolled-back ones included);
//   - idem_outbox_published_total: messages the broker confirmed and the
//     relay marked sent;
//   - idem_outbox_refused_total, idem_outbox_failures_total: refusals
//     counted toward parking, and other failures (broker or database
//     unavailable);
//   - idem_outbox_swept_total: sent messages deleted after the retention;
//   - idem_outbox_pending, idem_outbox_parked: the Source's messages not
//     sent, and those parked among them;
//   - idem_outbox_oldest_pending_age_seconds: how long the oldest pending
//     message has waited (0 when none).
//
// The three gauges come from one Backlog query, bounded by two seconds; a
// failed query leaves them out of the scrape.
type OutboxCollector struct {
	relay *outbox.Relay
	now   func() time.Time

	staged, published, refused, failures, swept, pending, parked, oldest *prometheus.Desc
}

var _ prometheus.Collector = (*OutboxCollector)(nil)

// NewOutboxCollector returns the collector of relay; register it. A nil cfg
// means defaults (Buckets is unused).
func NewOutboxCollector(relay *outbox.Relay, cfg *Config) (*OutboxCollector, error) {
	if relay == nil {
		return nil, errors.New("idemprom: NewOutboxCollector: the relay is nil")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Namespace == "" {
		c.Namespace = "idem"
	}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(c.Namespace, "outbox", name), help, nil, c.ConstLabels)
	}
	return &OutboxCollector{
		relay:     relay,
		now:       time.Now,
		staged:    d("staged_total", "Messages outbox.Stage wrote in this process, rolled-back ones included."),
		published: d("published_total", "Messages the broker confirmed and the relay marked sent."),
		refused:   d("refused_total", "Refusals by the broker, counted toward parking."),
		failures:  d("failures_total", "Failed claims, publishes and marks that were not refusals."),
		swept:     d("swept_total", "Sent messages deleted after the retention."),
		pending:   d("pending", "Messages staged and committed, not yet sent nor parked."),
		parked:    d("parked", "Messages parked after repeated refusals."),
		oldest:    d("oldest_pending_age_seconds", "Age of the oldest pending message, 0 when none."),
	}, nil
}

// Describe implements prometheus.Collector.
func (c *OutboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.staged, c.published, c.refused, c.failures, c.swept, c.pending, c.parked, c.oldest} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *OutboxCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.relay.Stats()
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(c.staged, outbox.StagedCount())
	counter(c.published, st.Published)
	counter(c.refused, st.Refused)
	counter(c.failures, st.Failures)
	counter(c.swept, st.Swept)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, err := c.relay.Source().Backlog(ctx)
	if err != nil {
		return
	}
	age := 0.0
	if !b.OldestPending.IsZero() && b.Pending > 0 {
		age = max(0, c.now().Sub(b.OldestPending).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(b.Pending))
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(b.Parked))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
