package idem_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// countingDeleter records the batches a Sweeper asks for.
type countingDeleter struct {
	mu      sync.Mutex
	left    int
	batches []int
	sweeps  chan struct{}
}

func (c *countingDeleter) DeleteExpired(ctx context.Context, p *idem.DeleteExpiredParams) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(c.left, p.Limit)
	c.left -= n
	c.batches = append(c.batches, n)
	if n < p.Limit && c.sweeps != nil {
		c.sweeps <- struct{}{}
	}
	return n, nil
}

func TestSweepDeletesInBoundedBatches(t *testing.T) {
	t.Parallel()
	d := &countingDeleter{left: 25}
	sw, err := idem.NewSweeper(d, &idem.SweeperConfig{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	n, err := sw.Sweep(context.Background())
	if err != nil || n != 25 {
		t.Fatalf("Sweep = %d, %v; want 25, nil", n, err)
	}
	if got := fmt.Sprint(d.batches); got != "[10 10 5]" {
		t.Errorf("batches = %s, want [10 10 5]", got)
	}
}

// E7 with clocks that disagree: the sweeper deletes a record only once it
// has been expired for Grace (by the sweeper's clock), so a sweeping host
// whose clock runs ahead does not delete records that hosts with a correct
// clock still replay. Reads still check expiry exactly.
func TestSweepKeepsRecordsWithinGrace(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		grace time.Duration
		kept  string // which of k0..k4 survive
	}{
		// Records were written at 0, 30, 60, 90 and 120 minutes and live
		// one hour; the sweep runs at 150 minutes, so k0..k3 expired 90,
		// 60, 30 and 0 minutes ago and k4 is live.
		{"Default", 0, "k3 k4"}, // 10 minutes
		{"FortyFiveMinutes", 45 * time.Minute, "k2 k3 k4"},
		{"ExactlyThirtyMinutes", 30 * time.Minute, "k3 k4"}, // k2 expired exactly Grace ago
		{"TwoHours", 2 * time.Hour, "k0 k1 k2 k3 k4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.New()
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := start
			clock := func() time.Time { return now }
			g, err := idem.New(s, &idem.Config{TTL: time.Hour, Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				now = start.Add(time.Duration(i) * 30 * time.Minute)
				if _, _, err := g.Do(context.Background(), idem.Request{Key: fmt.Sprint("k", i)}, setEffect(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
			}
			now = start.Add(150 * time.Minute)
			sw, err := idem.NewSweeper(s, &idem.SweeperConfig{BatchSize: 2, Grace: tt.grace, Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			n, err := sw.Sweep(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for i := range 5 {
				if _, err := s.Lookup(context.Background(), &idem.LookupParams{Key: fmt.Sprint("k", i)}); err == nil {
					kept = append(kept, fmt.Sprint("k", i))
				}
			}
			if got := strings.Join(kept, " "); got != tt.kept {
				t.Errorf("kept %q, want %q", got, tt.kept)
			}
			if want := 5 - len(strings.Fields(tt.kept)); n != want {
				t.Errorf("Sweep = %d, want %d", n, want)
			}
			// k3 expired exactly now: kept by the sweep, yet a retry
			// runs the work again.
			if _, replayed, err := g.Do(context.Background(), idem.Request{Key: "k3"}, setEffect("again")); err != nil || replayed {
				t.Errorf("Do(k3) after its expiry: replayed=%v err=%v, want a fresh run", replayed, err)
			}
		})
	}
}

func TestSweeperRunSweepsUntilCancelled(t *testing.T) {
	t.Parallel()
	d := &countingDeleter{sweeps: make(chan struct{}, 10)}
	sw, err := idem.NewSweeper(d, &idem.SweeperConfig{Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	for range 3 {
		select {
		case <-d.sweeps:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not sweep repeatedly")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestNewSweeperValidatesConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []*idem.SweeperConfig{{BatchSize: -1}, {Pause: -1}, {Interval: -1}, {Grace: -1}} {
		if _, err := idem.NewSweeper(&countingDeleter{}, cfg); err == nil {
			t.Errorf("NewSweeper(%+v): want an error", *cfg)
		}
	}
}
