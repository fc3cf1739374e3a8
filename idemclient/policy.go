package idemclient

import (
	"math/rand/v2"
	"time"
)

// Default backoff bounds.
const (
	DefaultBaseDelay = 100 * time.Millisecond
	DefaultMaxDelay  = 10 * time.Second
)

// NoRetryAfter is the retryAfter argument of Policy.Delay when the server
// sent no usable Retry-After hint.
const NoRetryAfter time.Duration = -1

// Policy is capped exponential backoff with full jitter. The zero value uses
// the defaults.
type Policy struct {
	// BaseDelay is the cap of the first delay; each further attempt doubles
	// the cap. Defaults to 100 milliseconds.
	BaseDelay time.Duration

	// MaxDelay is the largest delay ever returned, Retry-After hints
	// included. Defaults to 10 seconds.
	MaxDelay time.Duration
}

// Delay returns how long to wait after failed attempt number attempt
// (1 for the first attempt) before the next one. It is a pure function of
// its arguments: it reads no clock and draws randomness only from r (the
// math/rand/v2 global source when r is nil).
//
// Without a hint the delay is drawn uniformly from [0, cap], where cap is
// min(MaxDelay, BaseDelay·2^(attempt-1)) ("full jitter": clients that
// failed together do not come back together).
//
// With a Retry-After hint (retryAfter >= 0) the delay is the larger of the
// hint and that jittered delay, and never more than MaxDelay: the client
// waits at least as long as the server asked, unless the server asked for
// more than the policy allows.
func (p Policy) Delay(attempt int, r *rand.Rand, retryAfter time.Duration) time.Duration {
	base, maxd := p.BaseDelay, p.MaxDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if maxd <= 0 {
		maxd = DefaultMaxDelay
	}
	if attempt < 1 {
		attempt = 1
	}
	ceiling := min(base, maxd)
	for i := 1; i < attempt && ceiling < maxd; i++ {
		if ceiling > maxd/2 {
			ceiling = maxd
			break
		}
		ceiling *= 2
	}
	var d time.Duration
	if r != nil {
		d = time.Duration(r.Int64N(int64(ceiling) + 1))
	} else {
		d = time.Duration(rand.Int64N(int64(ceiling) + 1))
	}
	if retryAfter >= 0 {
		d = max(d, min(retryAfter, maxd))
	}
	return d
}
