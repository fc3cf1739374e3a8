package idemclient_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemkit/idem/idemclient"
)

// ceiling is the documented upper bound of the jittered delay after attempt n.
func ceiling(p idemclient.Policy, n int) time.Duration {
	c := p.BaseDelay
	for i := 1; i < n; i++ {
		c *= 2
		if c >= p.MaxDelay {
			return p.MaxDelay
		}
	}
	return min(c, p.MaxDelay)
}

// TestPolicyDelayBounds checks rule C2's backoff: the delay after attempt n
// is in [0, min(MaxDelay, BaseDelay·2^(n-1))], over many attempts and seeds.
func TestPolicyDelayBounds(t *testing.T) {
	t.Parallel()
	policies := []idemclient.Policy{
		{BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second},
		{BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond},
		{BaseDelay: 3 * time.Second, MaxDelay: 3 * time.Second},
		{BaseDelay: time.Nanosecond, MaxDelay: 1<<62 - 1}, // doubling must not overflow
	}
	for _, p := range policies {
		for seed := uint64(0); seed < 50; seed++ {
			r := rand.New(rand.NewPCG(seed, 1))
			for n := 1; n <= 80; n++ {
				got := p.Delay(n, r, idemclient.NoRetryAfter)
				if hi := ceiling(p, n); got < 0 || got > hi {
					t.Fatalf("%+v attempt %d seed %d: got %s, want within [0, %s]", p, n, seed, got, hi)
				}
			}
		}
	}
}

func TestPolicyDelayDefaults(t *testing.T) {
	t.Parallel()
	var p idemclient.Policy
	r := rand.New(rand.NewPCG(7, 7))
	for n := 1; n <= 40; n++ {
		if got := p.Delay(n, r, idemclient.NoRetryAfter); got < 0 || got > idemclient.DefaultMaxDelay {
			t.Fatalf("attempt %d: got %s, want within [0, %s]", n, got, idemclient.DefaultMaxDelay)
		}
	}
	if got := p.Delay(1, r, idemclient.NoRetryAfter); got > idemclient.DefaultBaseDelay {
		t.Fatalf("attempt 1: got %s, want at most %s", got, idemclient.DefaultBaseDelay)
	}
	// Attempt numbers below 1 are treated as 1.
	if got := p.Delay(-5, r, idemclient.NoRetryAfter); got > idemclient.DefaultBaseDelay {
		t.Fatalf("attempt -5: got %s, want at most %s", got, idemclient.DefaultBaseDelay)
	}
}

// TestPolicyDelayFullJitter checks that the delay is spread over the whole
// range (full jitter), not clustered at the cap: the mean of many draws is
// close to half the cap and both ends of the range are reached.
func TestPolicyDelayFullJitter(t *testing.T) {
	t.Parallel()
	p := idemclient.Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second}
	r := rand.New(rand.NewPCG(42, 42))
	const draws = 20000
	for _, n := range []int{1, 4, 12} {
		hi := ceiling(p, n)
		var sum, lo, top time.Duration = 0, hi, 0
		for range draws {
			d := p.Delay(n, r, idemclient.NoRetryAfter)
			sum += d
			lo, top = min(lo, d), max(top, d)
		}
		mean := sum / draws
		if mean < hi*45/100 || mean > hi*55/100 {
			t.Errorf("attempt %d: got mean %s, want about %s", n, mean, hi/2)
		}
		if lo > hi/100 || top < hi*99/100 {
			t.Errorf("attempt %d: got range [%s, %s], want close to [0, %s]", n, lo, top, hi)
		}
	}
}

// TestPolicyDelayRetryAfter checks that a Retry-After hint is honoured (the
// delay is at least the hint) and capped by MaxDelay.
func TestPolicyDelayRetryAfter(t *testing.T) {
	t.Parallel()
	p := idemclient.Policy{BaseDelay: 100 * time.Millisecond, MaxDelay: 10 * time.Second}
	tests := []struct {
		name   string
		hint   time.Duration
		lo, hi time.Duration
	}{
		{"Zero", 0, 0, 10 * time.Second},
		{"BelowCap", 3 * time.Second, 3 * time.Second, 10 * time.Second},
		{"AtCap", 10 * time.Second, 10 * time.Second, 10 * time.Second},
		{"OverCap", time.Hour, 10 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(0); seed < 20; seed++ {
				r := rand.New(rand.NewPCG(seed, 2))
				for n := 1; n <= 20; n++ {
					got := p.Delay(n, r, tt.hint)
					if got < tt.lo || got > tt.hi || got < min(tt.hint, p.MaxDelay) {
						t.Fatalf("attempt %d seed %d: got %s, want within [%s, %s]", n, seed, got, tt.lo, tt.hi)
					}
				}
			}
		})
	}
	// With a small base, the hint decides exactly.
	small := idemclient.Policy{BaseDelay: time.Nanosecond, MaxDelay: time.Minute}
	if got, want := small.Delay(1, rand.New(rand.NewPCG(1, 1)), 7*time.Second), 7*time.Second; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestPolicyDelayDeterministic checks that the delay depends on its
// arguments only: the same seed gives the same sequence.
func TestPolicyDelayDeterministic(t *testing.T) {
	t.Parallel()
	var p idemclient.Policy
	a, b := rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 9))
	for n := 1; n <= 30; n++ {
		if got, want := p.Delay(n, a, idemclient.NoRetryAfter), p.Delay(n, b, idemclient.NoRetryAfter); got != want {
			t.Fatalf("attempt %d: got %s, want %s", n, got, want)
		}
	}
}
