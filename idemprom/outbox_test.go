package idemprom_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/sqlitestore"
)

type refusingPublisher struct{}

func (refusingPublisher) Publish(_ context.Context, e outbox.Envelope) error {
	if e.Subject == "poison" {
		return outbox.Refused(errors.New("no"))
	}
	return nil
}

// TestOutboxCollector relays two messages, one of which is parked, and
// reads the metrics.
func TestOutboxCollector(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, _ := idem.New(s, nil)
	for _, subj := range []string{"ok", "poison", "later"} {
		if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: subj}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 200}, outbox.Stage(ctx, outbox.Message{Name: "m", Subject: subj})
		}); err != nil {
			t.Fatal(err)
		}
	}
	r := outbox.NewRelay(s.Outbox(), refusingPublisher{}, &outbox.RelayConfig{MaxAttempts: 1, BatchSize: 2})
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := idemprom.NewOutboxCollector(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for name, want := range map[string]float64{
		"idem_outbox_published_total": 1, "idem_outbox_refused_total": 1, "idem_outbox_parked": 1, "idem_outbox_pending": 1,
	} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			found = true
			m := mf.GetMetric()[0]
			got := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		if !found {
			t.Errorf("%s is missing", name)
		}
	}
	if n := testutil.CollectAndCount(c, "idem_outbox_oldest_pending_age_seconds"); n != 1 {
		t.Errorf("idem_outbox_oldest_pending_age_seconds: %d series, want 1", n)
	}
}
