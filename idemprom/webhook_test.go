package idemprom_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/idemwebhook"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestWebhooksCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := idemprom.NewWebhooks(reg, nil, "standard")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o.ObserveWebhook(ctx, idemwebhook.Event{Provider: "standard", Outcome: idemwebhook.OutcomeRejected, Reason: idemwebhook.ReasonBadSignature})
	o.ObserveWebhook(ctx, idemwebhook.Event{Provider: "standard", Outcome: idemwebhook.OutcomeExecuted, Verified: true})
	o.ObserveWebhook(ctx, idemwebhook.Event{Provider: "standard", Outcome: idemwebhook.OutcomeReplayed, Verified: true})
	if n := testutil.CollectAndCount(reg); n != 1+len(idemwebhook.Reasons())+len(idemwebhook.Outcomes()) {
		t.Fatalf("%d series", n)
	}
	c := o.Collectors()
	if got := testutil.ToFloat64(c[0].(*prometheus.CounterVec).WithLabelValues("standard")); got != 2 {
		t.Fatalf("verified %v", got)
	}
	if got := testutil.ToFloat64(c[1].(*prometheus.CounterVec).WithLabelValues("standard", "bad_signature")); got != 1 {
		t.Fatalf("rejected %v", got)
	}
	if got := testutil.ToFloat64(c[2].(*prometheus.CounterVec).WithLabelValues("standard", "replayed")); got != 1 {
		t.Fatalf("replayed %v", got)
	}
}
