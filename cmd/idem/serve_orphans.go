package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

// orphanMetrics are the series of the orphan scan (see
// transfers.Service.FinishOrphans):
//
//   - idem_payout_orphans_total{outcome}: orphaned payouts (pending in the
//     ledger, their leased record lost) taken up, by outcome: completed,
//     declined (credited back) or failed (left pending: they need a human);
//   - idem_payout_orphans_unfinished: the payouts the last scan left
//     pending, each reported in an ERROR log line;
//   - idem_payout_orphan_scans_total{result}: scans, ok or failed (the
//     ledger could not be read).
type orphanMetrics struct {
	payouts    *prometheus.CounterVec
	unfinished prometheus.Gauge
	scans      *prometheus.CounterVec
}

func newOrphanMetrics(reg prometheus.Registerer) *orphanMetrics {
	m := &orphanMetrics{
		payouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "idem", Subsystem: "payout", Name: "orphans_total",
			Help: "Orphaned payouts (pending in the ledger, their leased record lost) taken up by the orphan scan, by outcome (failed: left pending, they need a human).",
		}, []string{"outcome"}),
		unfinished: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "idem", Subsystem: "payout", Name: "orphans_unfinished",
			Help: "Orphaned payouts the last orphan scan left pending: they need a human.",
		}),
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "idem", Subsystem: "payout", Name: "orphan_scans_total",
			Help: "Orphan scans, by result (ok, or failed: the ledger could not be read).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.payouts, m.unfinished, m.scans)
	for _, o := range []string{"completed", "declined", "failed"} {
		m.payouts.WithLabelValues(o)
	}
	m.scans.WithLabelValues("ok")
	m.scans.WithLabelValues("failed")
	return m
}

func (m *orphanMetrics) report(rep transfers.OrphanReport) {
	m.payouts.WithLabelValues("completed").Add(float64(rep.Completed))
	m.payouts.WithLabelValues("declined").Add(float64(rep.Declined))
	m.payouts.WithLabelValues("failed").Add(float64(rep.Failed))
	m.unfinished.Set(float64(rep.Failed))
	m.scans.WithLabelValues("ok").Inc()
}

// startOrphanScan runs svc's orphan scan every interval beside the
// completer, the first one interval after the start, taking the pending
// payouts no execution has taken up for after, until ctx is done. It
// returns a function that stops it and waits for its scan to end.
func startOrphanScan(ctx context.Context, svc *transfers.Service, interval, after time.Duration, m *orphanMetrics, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rep, err := svc.FinishOrphans(ctx, &transfers.OrphanParams{After: after})
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("idem serve: orphan scan failed", "err", err)
				m.scans.WithLabelValues("failed").Inc()
			case err == nil:
				m.report(rep)
			}
		}
	}()
	return func() { cancel(); <-done }
}
