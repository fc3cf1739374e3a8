package idemprom

import (
	"context"
	"fmt"

	"github.com/idemkit/idem/idemwebhook"
	"github.com/prometheus/client_golang/prometheus"
)

// Webhooks is an idemwebhook.Observer that updates Prometheus metrics,
// each labelled by provider (a configured constant, so the series stay
// bounded):
//
//   - idem_webhook_verified_total: deliveries whose signature was accepted;
//   - idem_webhook_rejected_total{reason}: deliveries refused before
//     anything was recorded or run (idemwebhook.Reason);
//   - idem_webhook_deliveries_total{outcome}: every delivery by
//     idemwebhook.Outcome (executed, replayed, conflicted, ...).
type Webhooks struct {
	verified, rejected, deliveries *prometheus.CounterVec
}

var _ idemwebhook.Observer = (*Webhooks)(nil)

// NewWebhooks creates the webhook metrics, with the series of providers
// at zero, registers them with reg (unless reg is nil) and returns the
// Observer that updates them. cfg's Namespace and ConstLabels apply as in
// New; its Buckets are not used.
func NewWebhooks(reg prometheus.Registerer, cfg *Config, providers ...string) (*Webhooks, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Namespace == "" {
		c.Namespace = "idem"
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: c.Namespace, Name: name, Help: help, ConstLabels: c.ConstLabels,
		}, append([]string{"provider"}, labels...))
	}
	o := &Webhooks{
		verified:   counter("webhook_verified_total", "Webhook deliveries whose signature was accepted, by provider."),
		rejected:   counter("webhook_rejected_total", "Webhook deliveries refused before anything was recorded or run, by provider and reason.", "reason"),
		deliveries: counter("webhook_deliveries_total", "Webhook deliveries, by provider and outcome.", "outcome"),
	}
	for _, p := range providers {
		o.verified.WithLabelValues(p)
		for _, r := range idemwebhook.Reasons() {
			o.rejected.WithLabelValues(p, string(r))
		}
		for _, out := range idemwebhook.Outcomes() {
			o.deliveries.WithLabelValues(p, string(out))
		}
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

// ObserveWebhook implements idemwebhook.Observer.
func (o *Webhooks) ObserveWebhook(_ context.Context, e idemwebhook.Event) {
	if e.Verified {
		o.verified.WithLabelValues(e.Provider).Inc()
	}
	if e.Outcome == idemwebhook.OutcomeRejected {
		o.rejected.WithLabelValues(e.Provider, string(e.Reason)).Inc()
	}
	o.deliveries.WithLabelValues(e.Provider, string(e.Outcome)).Inc()
}

// Collectors returns the metrics, for registering them elsewhere.
func (o *Webhooks) Collectors() []prometheus.Collector {
	return []prometheus.Collector{o.verified, o.rejected, o.deliveries}
}
