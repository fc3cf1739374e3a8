package window_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/window"
	"github.com/idemkit/idem/window/windowtest"
)

func TestMemoryConformance(t *testing.T) {
	for name, shards := range map[string]int{"Sharded": 0, "OneShard": 1} {
		t.Run(name, func(t *testing.T) {
			windowtest.Run(t, windowtest.Harness{
				New: func(t testing.TB, lease, win time.Duration) (window.Window, func(time.Duration)) {
					c := testclock.New()
					return newMemory(t, &window.MemoryConfig{Lease: lease, Window: win, Shards: shards, Now: c.Now}), c.Advance
				},
				Exact: true,
			})
		})
	}
}

func newMemory(t testing.TB, cfg *window.MemoryConfig) *window.Memory {
	t.Helper()
	m, err := window.NewMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func reserve(t *testing.T, w window.Window, id string, want window.Status) window.Reservation {
	t.Helper()
	r, err := w.Reserve(context.Background(), id)
	if err != nil || r.Status != want {
		t.Fatalf("Reserve(%q) = %v, %v; want %v", id, r.Status, err, want)
	}
	return r
}

// TestMemoryFullRefusesAndForgetsNothing checks the behaviour when full:
// Reserve fails with ErrFull, and every id held stays as it was, until
// some are released or expire.
func TestMemoryFullRefusesAndForgetsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testclock.New()
	m := newMemory(t, &window.MemoryConfig{MaxIDs: 4, Shards: 1, Lease: time.Minute, Window: time.Hour, Now: c.Now})
	var held []window.Reservation
	for i := range 4 {
		r := reserve(t, m, fmt.Sprint(i), window.Reserved)
		if i < 2 {
			if err := m.Confirm(ctx, r.ID, r.Token); err != nil {
				t.Fatal(err)
			}
		} else {
			held = append(held, r)
		}
	}
	for range 3 {
		if _, err := m.Reserve(ctx, "new"); !errors.Is(err, window.ErrFull) {
			t.Fatalf("Reserve when full = %v, want ErrFull", err)
		}
	}
	if _, err := m.ReserveBatch(ctx, []string{"new"}); !errors.Is(err, window.ErrFull) {
		t.Fatalf("ReserveBatch when full = %v, want ErrFull", err)
	}
	if n := m.Len(); n != 4 {
		t.Fatalf("Len = %d, want 4", n)
	}
	reserve(t, m, "0", window.Done)
	reserve(t, m, "1", window.Done)
	reserve(t, m, "2", window.InProgress)
	reserve(t, m, "3", window.InProgress)

	// A release makes room at once.
	if err := m.Release(ctx, held[0].ID, held[0].Token); err != nil {
		t.Fatal(err)
	}
	reserve(t, m, "new", window.Reserved)
	if _, err := m.Reserve(ctx, "newer"); !errors.Is(err, window.ErrFull) {
		t.Fatalf("Reserve when full again = %v, want ErrFull", err)
	}
	// Expired leases make room; confirmed ids stay for their window.
	c.Advance(time.Minute)
	reserve(t, m, "newer", window.Reserved)
	reserve(t, m, "0", window.Done)
	reserve(t, m, "1", window.Done)
	if n := m.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
}

// TestMemoryLateConfirmWhenFull: a Confirm whose lease expired has to add
// the id back, and a full shard refuses it with ErrFull.
func TestMemoryLateConfirmWhenFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testclock.New()
	m := newMemory(t, &window.MemoryConfig{MaxIDs: 1, Lease: time.Minute, Now: c.Now})
	r := reserve(t, m, "a", window.Reserved)
	c.Advance(time.Minute)
	reserve(t, m, "b", window.Reserved)
	if err := m.Confirm(ctx, "a", r.Token); !errors.Is(err, window.ErrFull) {
		t.Fatalf("late Confirm when full = %v, want ErrFull", err)
	}
	reserve(t, m, "b", window.InProgress)
}

// TestMemoryBoundHoldsUnderConcurrency reserves from many goroutines into
// a small Memory: it never holds more than MaxIDs.
func TestMemoryBoundHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	const maxIDs = 256
	m := newMemory(t, &window.MemoryConfig{MaxIDs: maxIDs, Shards: 4})
	var full atomic.Bool
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				r, err := m.Reserve(context.Background(), fmt.Sprintf("%d-%d", g, i))
				switch {
				case errors.Is(err, window.ErrFull):
					full.Store(true)
				case err != nil:
					t.Error(err)
				case i%2 == 0:
					_ = m.Confirm(context.Background(), r.ID, r.Token)
				}
				if n := m.Len(); n > maxIDs {
					t.Errorf("Len = %d, more than MaxIDs %d", n, maxIDs)
				}
			}
		})
	}
	wg.Wait()
	if n := m.Len(); n != maxIDs {
		t.Errorf("Len = %d after 1600 new ids, want MaxIDs %d (the shards' shares add up to it)", n, maxIDs)
	}
	if !full.Load() {
		t.Error("no ErrFull seen")
	}
}

// TestMemoryExpiresInDeadlineOrder reserves ids one by one as the clock
// moves, confirms some out of order, and checks that each step of time
// forgets exactly the ids whose lease or window has ended.
func TestMemoryExpiresInDeadlineOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testclock.New()
	const lease, win, n = 10 * time.Second, 25 * time.Second, 12
	m := newMemory(t, &window.MemoryConfig{Lease: lease, Window: win, Shards: 1, Now: c.Now})
	start := c.Now()
	end := map[string]time.Time{} // when each id must be forgotten
	var rs []window.Reservation
	for i := range n {
		r := reserve(t, m, fmt.Sprint(i), window.Reserved)
		rs = append(rs, r)
		end[r.ID] = c.Now().Add(lease)
		c.Advance(time.Second)
	}
	// Confirm every third id, last first; release one.
	for i := n - 1; i >= 0; i -= 3 {
		if err := m.Confirm(ctx, rs[i].ID, rs[i].Token); err != nil {
			t.Fatal(err)
		}
		end[rs[i].ID] = c.Now().Add(win)
	}
	if err := m.Release(ctx, rs[9].ID, rs[9].Token); err != nil {
		t.Fatal(err)
	}
	delete(end, rs[9].ID)
	for step := c.Now().Sub(start); step <= 40*time.Second; step += 500 * time.Millisecond {
		now := start.Add(step)
		c.Advance(now.Sub(c.Now()))
		live := 0
		for _, e := range end {
			if now.Before(e) {
				live++
			}
		}
		if got := m.Len(); got != live {
			t.Fatalf("at +%v Len = %d, want %d", step, got, live)
		}
	}
}

// TestMemoryClockSteppingBackExpiresNothingEarly: an injected clock may
// step back; an id reserved after it keeps at least its whole lease.
func TestMemoryClockSteppingBackExpiresNothingEarly(t *testing.T) {
	t.Parallel()
	c := testclock.New()
	m := newMemory(t, &window.MemoryConfig{Lease: time.Minute, Shards: 1, Now: c.Now})
	reserve(t, m, "a", window.Reserved)
	c.Advance(-time.Hour)
	reserve(t, m, "b", window.Reserved)
	reserve(t, m, "a", window.InProgress)
	c.Advance(time.Minute - time.Nanosecond)
	reserve(t, m, "b", window.InProgress)
	c.Advance(time.Hour + time.Nanosecond)
	reserve(t, m, "a", window.Reserved)
	reserve(t, m, "b", window.Reserved)
}

// TestMemoryDigestsLongIDs: a long id is kept as its digest, and an id
// made to look like that digest is not taken for it.
func TestMemoryDigestsLongIDs(t *testing.T) {
	t.Parallel()
	m := newMemory(t, nil)
	long := strings.Repeat("L", 1000)
	reserve(t, m, long, window.Reserved)
	sum := sha256.Sum256([]byte(long))
	reserve(t, m, "\x00sha256:"+string(sum[:]), window.Reserved)
	reserve(t, m, long, window.InProgress)
	reserve(t, m, long[:64], window.Reserved)
	reserve(t, m, long[:65], window.Reserved)
}

func TestMemoryConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg   window.MemoryConfig
		field string
	}{
		{window.MemoryConfig{Lease: -1}, "Lease"},
		{window.MemoryConfig{Window: -1}, "Window"},
		{window.MemoryConfig{MaxIDs: -1}, "MaxIDs"},
		{window.MemoryConfig{Shards: -1}, "Shards"},
		{window.MemoryConfig{Shards: 1 << 20}, "Shards"},
		{window.MemoryConfig{MaxIDs: 1 << 40, Shards: 1}, "MaxIDs"},
	} {
		if _, err := window.NewMemory(&tt.cfg); err == nil || !strings.Contains(err.Error(), "MemoryConfig."+tt.field) {
			t.Errorf("NewMemory(%+v) = %v, want an error naming MemoryConfig.%s", tt.cfg, err, tt.field)
		}
	}
	m := newMemory(t, nil)
	if m.Lease() != 30*time.Second || m.Window() != 5*time.Minute {
		t.Errorf("defaults: Lease %v, Window %v; want 30s and 5m", m.Lease(), m.Window())
	}
	// Shards never exceed MaxIDs: one id fits, wherever it hashes.
	one := newMemory(t, &window.MemoryConfig{MaxIDs: 1})
	reserve(t, one, "a", window.Reserved)
	if _, err := one.Reserve(context.Background(), "b"); !errors.Is(err, window.ErrFull) {
		t.Fatalf("second id in a Memory of one = %v, want ErrFull", err)
	}
}

// TestMemoryFillsNearlyToMaxIDs: ids spread by hash, so the first ErrFull
// comes when the fullest shard holds its share, a little before MaxIDs
// ids in all (docs/DEDUP.md tells to leave that headroom).
func TestMemoryFillsNearlyToMaxIDs(t *testing.T) {
	t.Parallel()
	const maxIDs = 100_000
	m := newMemory(t, &window.MemoryConfig{MaxIDs: maxIDs})
	n := 0
	for ; ; n++ {
		_, err := m.Reserve(context.Background(), fmt.Sprint("id-", n))
		if errors.Is(err, window.ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("first ErrFull after %d ids: %.1f%% of MaxIDs", n, 100*float64(n)/maxIDs)
	if n < maxIDs*85/100 || n > maxIDs {
		t.Fatalf("first ErrFull after %d ids, want between 85%% of MaxIDs and MaxIDs (%d)", n, maxIDs)
	}
}
