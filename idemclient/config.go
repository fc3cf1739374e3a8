package idemclient

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/httpwire"
)

// Config configures a Client. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// HTTPClient sends the attempts. Retries happen above it: its
	// RoundTripper sees single attempts and must not create keys. The
	// Client works on a copy whose CheckRedirect lets a redirect through
	// only when it resends the intent unchanged (see MaxRedirects), then
	// asks this client's CheckRedirect, if any, which may refuse it but
	// can never turn a write into a GET. Changes made to it after New are
	// not seen. Defaults to a client over http.DefaultTransport.
	HTTPClient *http.Client

	// NewKey makes the key of each new intent. Its keys must pass
	// idem.ValidateKey and must be unique; use idem.RandomKey or idem.UUIDv7Key
	// unless keys come from elsewhere. Defaults to idem.RandomKey.
	NewKey func() string

	// QuoteKey sends every key as an RFC 8941 sf-string ("abc",
	// idem.QuoteKey), the form the IETF idempotency-key draft specifies,
	// for servers that parse the header strictly. Idem servers accept both
	// forms. Defaults to false: the key is written by idem.FormatKey, bare
	// when idem.ParseKey reads it back unchanged (as idem.RandomKey's and
	// idem.UUIDv7Key's keys always are), quoted otherwise.
	QuoteKey bool

	// Header is the name of the header that carries the key, for servers
	// configured with another name (idemhttp.Config.Header). Defaults to
	// Idempotency-Key.
	Header string

	// MaxAttempts is the most attempts one Do makes. Defaults to 10.
	MaxAttempts int

	// MaxElapsed bounds the time one Do spends on attempts and delays:
	// no attempt starts, and no delay is slept, past it. Defaults to
	// 2 minutes.
	MaxElapsed time.Duration

	// AttemptTimeout bounds one attempt, reading the response body
	// included. An attempt that times out is retried. Defaults to
	// 10 seconds.
	AttemptTimeout time.Duration

	// BaseDelay is Policy.BaseDelay, the cap of the first delay. Defaults
	// to 100 milliseconds, or MaxDelay if that is smaller.
	BaseDelay time.Duration

	// MaxDelay is Policy.MaxDelay, the longest delay between two
	// attempts; it also caps Retry-After hints. Defaults to 10 seconds, or
	// BaseDelay if that is larger.
	MaxDelay time.Duration

	// RetryStatuses are the response statuses that are retried, unless
	// the server marks a 4xx Idempotent-Replayed (a recorded answer is
	// final). 400 and 422 are client bugs and may not be listed; statuses
	// below 400 may not be listed either. Defaults to 408, 409, 425, 429,
	// 502, 503 and 504.
	RetryStatuses []int

	// FinalStatuses are the 4xx statuses that settle an intent the first
	// time they are seen: Do returns them as errors matching ErrRejected
	// and marks the intent resolved. Add the statuses your server records
	// as business answers (a 402 for a declined payment, say). Any other
	// 4xx that is neither retried nor marked Idempotent-Replayed, 401 and
	// 403 included, leaves the intent pending, since it may come from a
	// layer that ran nothing. A status may not be in both lists. Defaults
	// to 400, 404, 405, 413 and 422 (requests that can never succeed
	// unchanged), less any status listed in RetryStatuses.
	FinalStatuses []int

	// MaxResponseBytes bounds the response body read into memory. A
	// larger body fails the call without resolving the intent.
	// Defaults to 10 MiB.
	MaxResponseBytes int64

	// MaxIntentAge is the age past which an intent is no longer sent (see
	// ErrIntentExpired). Keep it well below the server's key TTL, which
	// defaults to 24 hours. Defaults to 12 hours.
	MaxIntentAge time.Duration

	// Journal, when set, persists every intent before its first attempt
	// and marks it resolved once it has a final answer, so that Resume
	// can finish it after a crash. Defaults to nil: intents live in
	// memory only.
	Journal Journal

	// Rand is the source of backoff jitter. A *rand.Rand is not safe for
	// concurrent use; the Client serialises its use. Defaults to the
	// math/rand/v2 global source.
	Rand *rand.Rand

	// Now returns the current time; it stamps intents and measures
	// MaxElapsed and MaxIntentAge. Defaults to time.Now.
	Now func() time.Time

	// Sleep waits d or until ctx is done, returning ctx's error in the
	// latter case. Tests inject a recorder here so that they never sleep.
	// Defaults to a timer.
	Sleep func(ctx context.Context, d time.Duration) error

	// Logger receives journal failures that do not change the answer
	// (a failed MarkResolved leaves the intent pending, which is safe). A
	// line names the intent by key_sha256 (idem.KeyHash of its key, as
	// idemhttp's lines do), never by its key. Defaults to slog.Default().
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultMaxAttempts      = 10
	DefaultMaxElapsed       = 2 * time.Minute
	DefaultAttemptTimeout   = 10 * time.Second
	DefaultMaxResponseBytes = 10 << 20
	DefaultMaxIntentAge     = 12 * time.Hour
)

// DefaultRetryStatuses returns the statuses retried by default: 408 (the
// server timed out waiting for the request), 409 (the key is in flight),
// 425 (too early), 429, 502, 503 and 504.
func DefaultRetryStatuses() []int {
	return []int{
		http.StatusRequestTimeout,
		http.StatusConflict,
		http.StatusTooEarly,
		http.StatusTooManyRequests,
		http.StatusBadGateway,
		http.StatusServiceUnavailable,
		http.StatusGatewayTimeout,
	}
}

// DefaultFinalStatuses returns the 4xx statuses that settle an intent by
// default: 400, 404, 405, 413 and 422, requests that can never succeed
// unchanged.
func DefaultFinalStatuses() []int {
	return []int{
		http.StatusBadRequest,
		http.StatusNotFound,
		http.StatusMethodNotAllowed,
		http.StatusRequestEntityTooLarge,
		http.StatusUnprocessableEntity,
	}
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	for _, d := range []struct {
		name string
		v    int64
	}{
		{"MaxAttempts", int64(out.MaxAttempts)},
		{"MaxElapsed", int64(out.MaxElapsed)},
		{"AttemptTimeout", int64(out.AttemptTimeout)},
		{"BaseDelay", int64(out.BaseDelay)},
		{"MaxDelay", int64(out.MaxDelay)},
		{"MaxResponseBytes", out.MaxResponseBytes},
		{"MaxIntentAge", int64(out.MaxIntentAge)},
	} {
		if d.v < 0 {
			return out, fmt.Errorf("idemclient: Config.%s must not be negative, got %d", d.name, d.v)
		}
	}
	if out.BaseDelay > 0 && out.MaxDelay > 0 && out.BaseDelay > out.MaxDelay {
		return out, fmt.Errorf("idemclient: Config.BaseDelay (%s) must not exceed Config.MaxDelay (%s)", out.BaseDelay, out.MaxDelay)
	}
	for _, s := range out.RetryStatuses {
		switch {
		case s == http.StatusBadRequest || s == http.StatusUnprocessableEntity:
			return out, fmt.Errorf("idemclient: Config.RetryStatuses must not contain %d: it is a client bug, retrying cannot fix it", s)
		case s < 400 || s > 599:
			return out, fmt.Errorf("idemclient: Config.RetryStatuses: %d is not an error status (400-599)", s)
		}
	}
	if out.Header == "" {
		out.Header = idemhttp.DefaultHeader
	} else if !httpwire.IsToken(out.Header) {
		return out, fmt.Errorf("idemclient: Config.Header %q is not a valid header name", out.Header)
	}
	if out.HTTPClient == nil {
		out.HTTPClient = &http.Client{}
	}
	if out.NewKey == nil {
		out.NewKey = idem.RandomKey
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.MaxElapsed == 0 {
		out.MaxElapsed = DefaultMaxElapsed
	}
	if out.AttemptTimeout == 0 {
		out.AttemptTimeout = DefaultAttemptTimeout
	}
	switch {
	case out.BaseDelay == 0 && out.MaxDelay == 0:
		out.BaseDelay, out.MaxDelay = DefaultBaseDelay, DefaultMaxDelay
	case out.BaseDelay == 0:
		out.BaseDelay = min(DefaultBaseDelay, out.MaxDelay)
	case out.MaxDelay == 0:
		out.MaxDelay = max(DefaultMaxDelay, out.BaseDelay)
	}
	if out.RetryStatuses == nil {
		out.RetryStatuses = DefaultRetryStatuses()
	}
	if out.FinalStatuses == nil {
		for _, s := range DefaultFinalStatuses() {
			if !slices.Contains(out.RetryStatuses, s) {
				out.FinalStatuses = append(out.FinalStatuses, s)
			}
		}
	}
	for _, s := range out.FinalStatuses {
		switch {
		case s < 400 || s > 499:
			return out, fmt.Errorf("idemclient: Config.FinalStatuses: %d is not a 4xx status", s)
		case slices.Contains(out.RetryStatuses, s):
			return out, fmt.Errorf("idemclient: Config.FinalStatuses: %d is also in Config.RetryStatuses", s)
		}
	}
	if out.MaxResponseBytes == 0 {
		out.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if out.MaxIntentAge == 0 {
		out.MaxIntentAge = DefaultMaxIntentAge
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.Sleep == nil {
		out.Sleep = sleep
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
