package rediswindow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/window"
	"github.com/idemkit/idem/window/rediswindow"
	"github.com/idemkit/idem/window/windowtest"
	"github.com/redis/go-redis/v9"
)

// clients are the kinds of client the tests run the window on: a
// *redis.Client, on which a batch's scripts cover many ids per run, and a
// *redis.Ring (of one shard), on which each id gets its own run, as on a
// cluster.
var clients = map[string]func(t testing.TB) redis.UniversalClient{
	"Client": func(t testing.TB) redis.UniversalClient { return redistest.Client(t) },
	"Ring": func(t testing.TB) redis.UniversalClient {
		r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": redistest.Require(t)}})
		t.Cleanup(func() { _ = r.Close() })
		return r
	},
}

func TestConformance(t *testing.T) {
	redistest.Require(t)
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			windowtest.Run(t, windowtest.Harness{
				New: func(t testing.TB, lease, win time.Duration) (window.Window, func(time.Duration)) {
					c := client(t)
					w, err := rediswindow.New(c, &rediswindow.Config{Name: redistest.Name(t, c), Lease: lease, Window: win})
					if err != nil {
						t.Fatal(err)
					}
					return w, time.Sleep
				},
				Lease: time.Second,
			})
		})
	}
}

// TestLargeBatches confirms and releases batches larger than one script
// run covers, with ids not held scattered through them.
func TestLargeBatches(t *testing.T) {
	redistest.Require(t)
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := client(t)
			w, err := rediswindow.New(c, &rediswindow.Config{Name: redistest.Name(t, c)})
			if err != nil {
				t.Fatal(err)
			}
			const n = 600
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprint("m", i)
			}
			rs, err := w.ReserveBatch(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			bad := []int{0, 255, 256, 300, 511, 599}
			for _, i := range bad {
				rs[i].Token++ // not the holder's
			}
			var be *window.BatchError
			if err := w.ConfirmBatch(ctx, rs[:n/2]); !errors.As(err, &be) || !slices.Equal(be.NotHeld, []int{0, 255, 256}) {
				t.Fatalf("ConfirmBatch = %v, want indexes 0, 255, 256 not held", err)
			}
			if err := w.ReleaseBatch(ctx, rs[n/2:]); !errors.As(err, &be) || !slices.Equal(be.NotHeld, []int{0, 211, 299}) {
				t.Fatalf("ReleaseBatch = %v, want indexes 0, 211, 299 not held", err)
			}
			again, err := w.ReserveBatch(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range again {
				want := window.Done
				switch {
				case slices.Contains(bad, i):
					want = window.InProgress
				case i >= n/2:
					want = window.Reserved
				}
				if r.Status != want {
					t.Fatalf("%s is %v, want %v", r.ID, r.Status, want)
				}
			}
		})
	}
}

// setup returns a window with the given lease and window on the test
// server, and its client.
func setup(t *testing.T, lease, win time.Duration) (*rediswindow.Window, *redis.Client) {
	t.Helper()
	c := redistest.Client(t)
	w, err := rediswindow.New(c, &rediswindow.Config{Name: redistest.Name(t, c), Lease: lease, Window: win})
	if err != nil {
		t.Fatal(err)
	}
	return w, c
}

// TestKeyHoldsTheTokenForTheLeaseThenTheWindow checks the layout the docs
// promise: a reservation is a key with the lease's TTL, a confirmation
// extends it to the window, a release deletes it.
func TestKeyHoldsTheTokenForTheLeaseThenTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, c := setup(t, time.Minute, time.Hour)
	r, err := w.Reserve(ctx, "a")
	if err != nil || r.Status != window.Reserved {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}
	key := w.Key("a")
	if !strings.HasPrefix(key, rediswindow.KeyPrefix) || !strings.HasSuffix(key, ":a") {
		t.Fatalf("Key(a) = %q", key)
	}
	checkKey(t, c, key, "h", 50*time.Second, time.Minute)
	if err := w.Confirm(ctx, "a", r.Token); err != nil {
		t.Fatal(err)
	}
	checkKey(t, c, key, "d", 59*time.Minute, time.Hour)

	r, err = w.Reserve(ctx, "b")
	if err != nil || r.Status != window.Reserved {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}
	if err := w.Release(ctx, "b", r.Token); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, w.Key("b")).Result(); err != nil || n != 0 {
		t.Fatalf("the released key exists: %d, %v", n, err)
	}
}

func checkKey(t *testing.T, c *redis.Client, key, prefix string, minTTL, maxTTL time.Duration) {
	t.Helper()
	ctx := context.Background()
	v, err := c.Get(ctx, key).Result()
	if err != nil || !strings.HasPrefix(v, prefix) {
		t.Fatalf("GET %s = %q, %v; want a value starting with %q", key, v, err, prefix)
	}
	ttl, err := c.PTTL(ctx, key).Result()
	if err != nil || ttl < minTTL || ttl > maxTTL {
		t.Fatalf("PTTL %s = %v, %v; want between %v and %v", key, ttl, err, minTTL, maxTTL)
	}
}

// TestProcessesShareTheWindow races reservers of one id through separate
// clients, each with its own connections, as consumer processes do.
func TestProcessesShareTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c0 := redistest.Client(t)
	name := redistest.Name(t, c0)
	const clients = 8
	ws := make([]*rediswindow.Window, clients)
	for i := range ws {
		w, err := rediswindow.New(redistest.Client(t), &rediswindow.Config{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	for round := range 20 {
		id := "m" + strings.Repeat("x", round)
		start := make(chan struct{})
		rs := make([]window.Reservation, clients)
		errs := make([]error, clients)
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				<-start
				rs[i], errs[i] = w.Reserve(ctx, id)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		winners := 0
		for i, r := range rs {
			if r.Status == window.Reserved {
				winners++
				if err := ws[(i+1)%clients].Confirm(ctx, id, r.Token); err != nil {
					t.Fatalf("Confirm through another client: %v", err)
				}
			}
		}
		if winners != 1 {
			t.Fatalf("%d of %d clients reserved %q, want 1", winners, clients, id)
		}
		if r, err := ws[0].Reserve(ctx, id); err != nil || r.Status != window.Done {
			t.Fatalf("Reserve after Confirm = %v, %v; want Done", r.Status, err)
		}
	}
}

// TestUnreachableServerFailsClosed checks that a window whose server is
// down answers errors, and that Do then runs nothing and asks for a retry.
func TestUnreachableServerFailsClosed(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	defer c.Close()
	w, err := rediswindow.New(c, &rediswindow.Config{Name: "unreachable"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := w.Reserve(ctx, "a"); err == nil {
		t.Fatal("Reserve on an unreachable server succeeded")
	}
	if _, err := w.ReserveBatch(ctx, []string{"a", "b"}); err == nil {
		t.Fatal("ReserveBatch on an unreachable server succeeded")
	}
	ran := false
	o, err := window.Do(ctx, w, "a", func(context.Context) error { ran = true; return nil })
	if o != window.Retry || err == nil || ran {
		t.Fatalf("Do on an unreachable server = %v, %v, ran %v; want Retry, an error, no run", o, err, ran)
	}
	if err := w.Confirm(ctx, "a", 1); err == nil || errors.Is(err, window.ErrNotHeld) {
		t.Fatalf("Confirm on an unreachable server = %v, want the client's error", err)
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr()})
	defer c.Close()
	for _, tt := range []struct {
		cfg   *rediswindow.Config
		field string
	}{
		{nil, "Name"},
		{&rediswindow.Config{}, "Name"},
		{&rediswindow.Config{Name: "a:b"}, "Name"},
		{&rediswindow.Config{Name: "a", Lease: -time.Second}, "Lease"},
		{&rediswindow.Config{Name: "a", Lease: time.Microsecond}, "Lease"},
		{&rediswindow.Config{Name: "a", Window: time.Microsecond}, "Window"},
	} {
		if _, err := rediswindow.New(c, tt.cfg); err == nil || !strings.Contains(err.Error(), "Config."+tt.field) {
			t.Errorf("New(%+v) = %v, want an error naming Config.%s", tt.cfg, err, tt.field)
		}
	}
	w, err := rediswindow.New(c, &rediswindow.Config{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Lease() != 30*time.Second || w.Window() != 5*time.Minute {
		t.Errorf("defaults: Lease %v, Window %v; want 30s and 5m", w.Lease(), w.Window())
	}
	if _, err := rediswindow.New(nil, &rediswindow.Config{Name: "a"}); err == nil {
		t.Error("New with a nil client succeeded")
	}
}

// TestFailedBatchReleasesWhatItReserved: a ReserveBatch that fails on one
// id (here a key of the wrong type, which makes its SET … GET fail) gives
// back the ids it did reserve, rather than leave them in progress for a
// whole lease while the batch is delivered again.
func TestFailedBatchReleasesWhatItReserved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, c := setup(t, time.Hour, time.Hour)
	if err := c.RPush(ctx, w.Key("bad"), "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReserveBatch(ctx, []string{"a", "bad", "b"}); err == nil {
		t.Fatal("ReserveBatch with a broken key succeeded")
	}
	for _, id := range []string{"a", "b"} {
		if r, err := w.Reserve(ctx, id); err != nil || r.Status != window.Reserved {
			t.Errorf("Reserve(%q) after the failed batch = %v, %v; want Reserved", id, r.Status, err)
		}
	}
}

// TestDurationsRoundUpToMilliseconds: Redis counts in milliseconds; a
// lease of 1.5ms must last 2ms, never 1.
func TestDurationsRoundUpToMilliseconds(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr()})
	defer c.Close()
	w, err := rediswindow.New(c, &rediswindow.Config{Name: "a", Lease: 1500 * time.Microsecond, Window: time.Minute + time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if w.Lease() != 2*time.Millisecond || w.Window() != time.Minute+time.Millisecond {
		t.Fatalf("Lease %v, Window %v; want 2ms and 1m0.001s", w.Lease(), w.Window())
	}
}
