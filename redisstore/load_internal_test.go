//go:build unix

package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// The load of the restart and failover tests: workers claim new keys and
// complete them, with real times, and keep a ledger of what Redis
// acknowledged and when. After the fault, verify reads every key back.

type ack struct {
	token int64
	// sentAt is when the claim was sent, claimedAt when its answer was
	// read. Only sentAt says which server ran it: an answer written
	// before a kill can sit in the socket and be read after the restart
	// by a worker the scheduler held back.
	sentAt, claimedAt time.Time
	doneAt            time.Time // when the completion was acknowledged; zero if not
}

type ledger struct {
	mu     sync.Mutex
	keys   map[string]*ack
	errors atomic.Int64
}

// since returns how many claims were acknowledged after t.
func (l *ledger) since(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.keys {
		if a.claimedAt.After(t) {
			n++
		}
	}
	return n
}

func newLedger() *ledger { return &ledger{keys: make(map[string]*ack)} }

// load runs workers until ctx ends. Keys are "w<worker>-<n>".
func load(ctx context.Context, s *Store, workers int, l *ledger) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				key := fmt.Sprintf("w%d-%d", w, n)
				now := time.Now()
				c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "load", Key: key, Fingerprint: "fp", Now: now, Lease: time.Hour})
				if err != nil || !c.Claimed {
					l.errors.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				a := &ack{token: c.Lease.Token, sentAt: now, claimedAt: time.Now()}
				l.mu.Lock()
				l.keys[key] = a
				l.mu.Unlock()
				err = s.Complete(ctx, &idem.CompleteParams{Lease: c.Lease, Result: idem.Result{Status: 200, Body: []byte(key)}, Now: now, ExpiresAt: now.Add(time.Hour)})
				if err != nil {
					l.errors.Add(1)
					continue
				}
				l.mu.Lock()
				a.doneAt = time.Now()
				l.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// loss is what verify found: of the acknowledged claims and completions,
// those gone.
type loss struct {
	claims, completions         int
	lostClaims, lostCompletions map[string]bool
	pendingNotFound             int // pending records Abandoned does not list
}

func (x loss) String() string {
	return fmt.Sprintf("acknowledged %d claims and %d completions; lost %d claims and %d completions; %d pending records not in the index",
		x.claims, x.completions, len(x.lostClaims), len(x.lostCompletions), x.pendingNotFound)
}

// verify reads every key of l back (through a claim with another
// fingerprint, which never takes a record over) and lists, at a time past
// every lease, the abandoned records.
func verify(t *testing.T, s *Store, l *ledger) loss {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	x := loss{lostClaims: map[string]bool{}, lostCompletions: map[string]bool{}}
	pending := map[string]bool{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, a := range l.keys {
		x.claims++
		if !a.doneAt.IsZero() {
			x.completions++
		}
		var c *idem.Claim
		var err error
		for range 100 { // the cluster may still settle
			c, err = s.Claim(ctx, &idem.ClaimParams{Scope: "load", Key: key, Fingerprint: "verify", Now: time.Now(), Lease: time.Hour})
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("verify %q: %v", key, err)
		}
		switch {
		case c.Claimed: // nothing was left of the key
			x.lostClaims[key] = true
			if !a.doneAt.IsZero() {
				x.lostCompletions[key] = true
			}
		case c.Record.Token < a.token:
			x.lostClaims[key] = true
		case !a.doneAt.IsZero() && (c.Record.State != idem.StateCompleted || string(c.Record.Result.Body) != key):
			x.lostCompletions[key] = true
		case c.Record.State == idem.StatePending:
			pending[key] = true
		}
	}
	recs, err := s.Abandoned(ctx, &idem.AbandonedParams{Now: time.Now().Add(2 * time.Hour), Limit: 1 << 20})
	if err != nil {
		t.Fatalf("Abandoned: %v", err)
	}
	listed := map[string]bool{}
	for _, r := range recs {
		listed[r.Key] = true
	}
	for key := range pending {
		if !listed[key] {
			x.pendingNotFound++
		}
	}
	return x
}

// faultRun runs load for a while, then fault, then load again, and returns
// the ledger and when the fault began and ended.
func faultRun(t *testing.T, s *Store, workers int, fault func()) (l *ledger, faultStart, faultEnd time.Time) {
	t.Helper()
	l = newLedger()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); load(ctx, s, workers, l) }()
	time.Sleep(700 * time.Millisecond)
	faultStart = time.Now()
	fault()
	faultEnd = time.Now()
	// Load on until 50 claims after the fault were acknowledged (at
	// least 700 ms, at most 30 s): a client may take a while to find the
	// cluster's new shape.
	deadline := faultEnd.Add(30 * time.Second)
	time.Sleep(700 * time.Millisecond)
	for time.Now().Before(deadline) && l.since(faultEnd) < 50 {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-done
	return l, faultStart, faultEnd
}

func clientOptions(addr string) *redis.Options {
	return &redis.Options{Addr: addr, DialTimeout: 500 * time.Millisecond, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
}
