package idem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// Call keeps Guard.Do's guarantees: an error records nothing and is
// returned as it is; concurrent callers run fn once; the others are
// refused in flight or get the decoded replay; a record that does not
// decode into T is an error, and fn does not run.
func TestCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ms := memstore.New()
	g, err := idem.New(ms, &idem.Config{ReplayCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	type out struct{ N int }
	req := func(key string) idem.Request {
		fp, err := idem.InputFingerprint("op", map[string]int{"a": 1, "b": 2})
		if err != nil {
			t.Fatal(err)
		}
		return idem.Request{Scope: "s", Key: key, Fingerprint: fp}
	}

	failed := errors.New("failed")
	if _, _, err := idem.Call(ctx, g, req("e"), func(context.Context) (out, error) { return out{}, failed }); !errors.Is(err, failed) {
		t.Fatalf("fn's error: %v", err)
	}
	if _, _, err := idem.Call(ctx, g, req("e"), func(context.Context) (chan int, error) { return make(chan int), nil }); err == nil {
		t.Fatal("an unencodable result was accepted")
	}
	if v, replayed, err := idem.Call(ctx, g, req("e"), func(context.Context) (out, error) { return out{7}, nil }); err != nil || replayed || v.N != 7 {
		t.Fatalf("after failures: %v %v %v, want a first execution", v, replayed, err)
	}

	var runs atomic.Int64
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 20 {
		wg.Go(func() {
			v, _, err := idem.Call(ctx, g, req("storm"), func(context.Context) (out, error) {
				return out{int(runs.Add(1))}, nil
			})
			if err == nil && v.N != 1 {
				bad.Add(1)
			} else if err != nil && !errors.Is(err, idem.ErrInFlight) {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if runs.Load() != 1 || bad.Load() != 0 {
		t.Fatalf("runs = %d, bad answers = %d; want 1, 0", runs.Load(), bad.Load())
	}

	// Equal inputs as JSON fingerprint alike; another op does not.
	a, _ := idem.InputFingerprint("op", map[string]int{"b": 2, "a": 1})
	b, _ := idem.InputFingerprint("op", struct{ A, B int }{1, 2})
	c, _ := idem.InputFingerprint("other", map[string]int{"a": 1, "b": 2})
	if a != req("x").Fingerprint || b == a || c == a {
		t.Fatalf("fingerprints: %s %s %s", a, b, c)
	}

	// A record that is not T's JSON.
	if _, _, err := g.Do(ctx, req("raw"), func(context.Context) (idem.Result, error) {
		return idem.Result{Status: 201, Body: []byte("not json")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ran := false
	if _, _, err := idem.Call(ctx, g, req("raw"), func(context.Context) (out, error) { ran = true; return out{}, nil }); err == nil || ran {
		t.Fatalf("undecodable record: err=%v ran=%v", err, ran)
	}
}
