package idemwebhook

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// Config configures a receiver. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Provider names the provider in the scope
	// ("webhook/<provider>/<endpoint>"), the logs and the events.
	// Defaults to the Verifier's Provider.
	Provider string

	// Endpoint names the receiving endpoint, so that two endpoints of one
	// provider keep their delivery ids apart. Defaults to "default".
	Endpoint string

	// MaxBody is the largest body, in bytes, a delivery may carry; a larger
	// one is refused with 413 before its signature is checked. Defaults
	// to 1 MiB.
	MaxBody int64

	// Tolerance bounds how far a signed timestamp may be from the
	// receiver's clock, either way: a delivery signed earlier (a replay)
	// or later (a skewed or forged clock) is refused with 401. Schemes
	// that sign no timestamp (GitHub, Shopify) are not bounded. Defaults
	// to 5 minutes.
	Tolerance time.Duration

	// Now is the receiver's clock. Defaults to time.Now.
	Now func() time.Time

	// TTL is how long a delivery is remembered; a redelivery after it is
	// processed again. It must outlast the provider's retries (Stripe
	// retries for 3 days, Standard Webhooks senders for about as long).
	// Defaults to the Guard's TTL.
	TTL time.Duration

	// Leased serves the handler in leased mode, for handlers whose effect
	// is outside the store's database: the claim of the delivery commits
	// first, with a lease (see idemhttp.RouteOptions.Leased). Kind is then
	// required. Defaults to nil: atomic mode, the handler's effect and the
	// delivery's record commit in one transaction.
	Leased *idem.Leased

	// Kind names the leased handler for the completer (registered as
	// "http:"+Kind). Required with Leased, and only then.
	Kind string

	// UnavailableRetryAfter is the Retry-After sent with 503. Defaults to
	// 5 seconds.
	UnavailableRetryAfter time.Duration

	// Logger receives a line per refused or conflicting delivery (Warn),
	// and per other delivery at Debug. Secrets and signatures are never
	// logged; delivery ids appear only as idem.KeyHash. Defaults to
	// slog.Default() at the time of each line.
	Logger *slog.Logger

	// Observer is told the outcome of every delivery. Defaults to none.
	Observer Observer
}

// Defaults of Config.
const (
	DefaultMaxBody   = 1 << 20
	DefaultTolerance = 5 * time.Minute
	DefaultEndpoint  = "default"
)

func (c *Config) withDefaults(v Verifier) (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Provider == "" {
		out.Provider = v.Provider()
	}
	if out.Endpoint == "" {
		out.Endpoint = DefaultEndpoint
	}
	if out.MaxBody == 0 {
		out.MaxBody = DefaultMaxBody
	}
	if out.Tolerance == 0 {
		out.Tolerance = DefaultTolerance
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	switch {
	case out.MaxBody < 0:
		return out, fmt.Errorf("idemwebhook: Config.MaxBody must not be negative, got %d", out.MaxBody)
	case out.Tolerance < 0:
		return out, fmt.Errorf("idemwebhook: Config.Tolerance must not be negative, got %s", out.Tolerance)
	case out.TTL < 0:
		return out, fmt.Errorf("idemwebhook: Config.TTL must not be negative, got %s", out.TTL)
	case out.Leased != nil && out.Kind == "":
		return out, fmt.Errorf("idemwebhook: Config.Leased needs a Kind")
	case out.Leased == nil && out.Kind != "":
		return out, fmt.Errorf("idemwebhook: Config.Kind %q is set but Leased is not", out.Kind)
	case !validName(out.Provider):
		return out, fmt.Errorf("idemwebhook: the provider %q must be 1 to 64 letters, digits, - or _", out.Provider)
	case !validName(out.Endpoint):
		return out, fmt.Errorf("idemwebhook: Config.Endpoint %q must be 1 to 64 letters, digits, - or _", out.Endpoint)
	}
	return out, nil
}

// validName reports whether s can be a part of a scope.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0
}

// Scope returns the scope under which a receiver records the deliveries of
// provider at endpoint.
func Scope(provider, endpoint string) string {
	return "webhook/" + provider + "/" + endpoint
}
