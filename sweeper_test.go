package idem_test

import (
	"context"
	"fmt"
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

func TestSweepOnMemstoreKeepsLiveRecords(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	g, err := idem.New(s, &idem.Config{TTL: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, _, err := g.Do(context.Background(), idem.Request{Key: fmt.Sprint("k", i)}, setEffect(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		now = now.Add(30 * time.Minute)
	}
	// Records were written at 0, 30, 60, 90, 120 minutes and live one hour;
	// at 150 minutes the first four have expired (k3 exactly now).
	sw, err := idem.NewSweeper(s, &idem.SweeperConfig{BatchSize: 2, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sw.Sweep(context.Background()); err != nil || n != 4 {
		t.Errorf("Sweep = %d, %v; want 4, nil", n, err)
	}
	for i := range 5 {
		_, err := s.Lookup(context.Background(), &idem.LookupParams{Key: fmt.Sprint("k", i)})
		if kept := err == nil; kept != (i >= 4) {
			t.Errorf("k%d kept = %v, want %v", i, kept, i >= 4)
		}
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
	for _, cfg := range []*idem.SweeperConfig{{BatchSize: -1}, {Pause: -1}, {Interval: -1}} {
		if _, err := idem.NewSweeper(&countingDeleter{}, cfg); err == nil {
			t.Errorf("NewSweeper(%+v): want an error", *cfg)
		}
	}
}
