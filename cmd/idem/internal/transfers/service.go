package transfers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemwebhook"
)

// Config configures a Service. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Guard protects POST /transfers. Nil runs the service without
	// idempotency: keys are ignored and every request runs in its own
	// transaction. Defaults to nil.
	Guard *idem.Guard

	// Observer is told the outcome of every protected request (see
	// idemhttp.Config.Observer). Defaults to none.
	Observer idem.Observer

	// Metrics, when set, is served at GET /metrics. Defaults to none.
	Metrics http.Handler

	// Logger receives the service's log lines. Defaults to slog.Default().
	Logger *slog.Logger

	// Now returns the time stamped on transfers. Defaults to time.Now.
	Now func() time.Time

	// BodyTimeout bounds how long a client may take to send a request
	// body, counted from when the service starts reading it. A client
	// that is slower is answered 408 and nothing runs. Defaults to
	// 10 seconds.
	BodyTimeout time.Duration

	// RequestTimeout bounds each request's work once its body has
	// arrived: waiting for a connection or a lock, and the database work.
	// Past it the work is cancelled, its transaction rolled back, and the
	// request answered 503 with Retry-After (nothing was recorded, so the
	// retry is safe). It also bounds the streaming of GET /transfers, to a
	// client that reads it too. Every answer must have been written within
	// BodyTimeout + RequestTimeout + 10 seconds of the request's start.
	// Defaults to 10 seconds.
	RequestTimeout time.Duration

	// MaxConcurrent bounds how many POST /transfers are received and
	// served at once. The next one is answered 503 too-busy with
	// Retry-After before its body is read, so that memory stays bounded
	// (each request holds its body, up to 1 MiB, about twice) however
	// many clients connect. Defaults to 128.
	MaxConcurrent int

	// Events stages one transfer event (see Event) per applied transfer,
	// whether made over HTTP, from a message or from an import row, with
	// outbox.Stage in the transaction that applies it, which must be
	// one recording a key (Guard's, an inbox's, a batch row's) on a store
	// with an outbox: a transfer outside one fails. A relay publishes
	// them. Defaults to false.
	Events bool

	// Leased serves POST /payouts in leased mode (see docs/PAYOUTS.md);
	// it needs Guard. Its store is the ledger's store (an
	// idem.LeasedTxStore: each step that writes the ledger commits with
	// its recovery point), or any other idem.LeasedStore, such as Redis
	// (each such step commits first in the ledger, which makes it
	// idempotent by itself, and is then recorded; docs/PAYOUTS.md, "On
	// Redis"). The service registers
	// the payout work with it as kind "http:"+PayoutKind, so that a
	// Completer of this Leased finishes abandoned payouts. Defaults to
	// nil: POST /payouts is not served.
	Leased *idem.Leased

	// Provider is the base URL of the payment provider that payouts
	// charge (POST {Provider}/charges). Required with Leased, and only
	// then.
	Provider string

	// ProviderTimeout bounds each call to the provider. Defaults to
	// 2 seconds.
	ProviderTimeout time.Duration

	// ProviderAttempts is how many calls, with the same key, one
	// execution of a payout makes while the provider's answer stays
	// unknown (a 5xx, a timeout, a lost connection); the payout then
	// stays pending for a retry or the completer. Defaults to 3.
	ProviderAttempts int

	// KeyTTL is how long a payout stays bound to its Idempotency-Key in
	// the ledger: an execution that finds no leased record for the key
	// (Redis lost it) but a payout under it younger than KeyTTL resumes
	// that payout, and one older is taken for a payout whose record
	// expired, so the key names a new one (docs/PAYOUTS.md, "When Redis
	// loses a record"). Set it to the TTL of Leased's records. Defaults
	// to idem.DefaultTTL.
	KeyTTL time.Duration

	// WebhookSecrets, when set, serve POST /webhooks/deposits: deliveries
	// signed with Standard Webhooks under any of these secrets ("whsec_…";
	// several while one is rotated), received exactly once through Guard
	// (see deposit.go). They are never logged. Defaults to none.
	WebhookSecrets []string

	// WebhookObserver is told the outcome of every delivery. Defaults to
	// none.
	WebhookObserver idemwebhook.Observer
}

// PayoutKind is the RouteOptions.Kind of POST /payouts.
const PayoutKind = "payouts"

// Defaults of Config.
const (
	DefaultBodyTimeout    = 10 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultMaxConcurrent  = 128

	DefaultProviderTimeout  = 2 * time.Second
	DefaultProviderAttempts = 3
)

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if err := defaultIfZero(&out.BodyTimeout, DefaultBodyTimeout, "Config.BodyTimeout"); err != nil {
		return out, err
	}
	if err := defaultIfZero(&out.RequestTimeout, DefaultRequestTimeout, "Config.RequestTimeout"); err != nil {
		return out, err
	}
	if err := defaultIfZero(&out.MaxConcurrent, DefaultMaxConcurrent, "Config.MaxConcurrent"); err != nil {
		return out, err
	}
	switch {
	case out.Leased != nil && out.Guard == nil:
		return out, errors.New("transfers: Config.Leased needs Config.Guard")
	case (out.Leased != nil) != (out.Provider != ""):
		return out, errors.New("transfers: Config.Leased and Config.Provider go together: payouts need both")
	}
	if out.Provider != "" {
		u, err := url.Parse(out.Provider)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return out, fmt.Errorf("transfers: Config.Provider must be an http:// or https:// URL, got %q", out.Provider)
		}
	}
	if err := defaultIfZero(&out.ProviderTimeout, DefaultProviderTimeout, "Config.ProviderTimeout"); err != nil {
		return out, err
	}
	if err := defaultIfZero(&out.KeyTTL, idem.DefaultTTL, "Config.KeyTTL"); err != nil {
		return out, err
	}
	if err := defaultIfZero(&out.ProviderAttempts, DefaultProviderAttempts, "Config.ProviderAttempts"); err != nil {
		return out, err
	}
	return out, nil
}

// Service is the transfers service. Its handler is safe for concurrent use.
type Service struct {
	db       *Database
	cfg      Config
	handler  http.Handler
	slots    chan struct{} // one per POST /transfers or /payouts being served
	provider *provider     // nil without Config.Provider
	// localSteps reports that Config.Leased's store commits a step with
	// the ledger's writes (see ledgerStep).
	localSteps bool
}

// New creates the ledger's tables if needed and returns the service.
func New(ctx context.Context, db *Database, cfg *Config) (*Service, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := db.migrate(ctx); err != nil {
		return nil, fmt.Errorf("transfers: %w", err)
	}
	s := &Service{db: db, cfg: c, slots: make(chan struct{}, c.MaxConcurrent)}
	if c.Provider != "" {
		s.provider = newProvider(c)
		_, s.localSteps = c.Leased.Store().(idem.LeasedTxStore)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("PUT /accounts/{id}", s.putAccount)
	mux.HandleFunc("GET /accounts/{id}", s.getAccount)
	mux.HandleFunc("GET /transfers", s.listTransfers)
	mux.HandleFunc("GET /transfers/{id}", s.getTransfer)
	mux.HandleFunc("GET /payouts", s.listPayouts)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if err := s.routeDeposits(mux); err != nil {
		return nil, err
	}
	if c.Metrics != nil {
		mux.Handle("GET /metrics", c.Metrics)
	}
	create := http.Handler(http.HandlerFunc(s.createTransfer))
	if c.Guard != nil {
		m, err := idemhttp.New(c.Guard, &idemhttp.Config{
			// The demo lets callers without credentials share the
			// anonymous scope; a real service would refuse them.
			Anonymous:      true,
			JSONBodies:     true, // decode ignores Content-Type, so the fingerprint does too
			MaxRequestBody: maxBody,
			Logger:         c.Logger,
			Observer:       c.Observer,
			Leased:         c.Leased,
		})
		if err != nil {
			return nil, err
		}
		create = m.Handler(create)
		if c.Leased != nil {
			// Leased mode: the charge at the provider cannot commit with
			// the key, so the claim commits first, with a lease, and the
			// work keeps recovery points (see docs/PAYOUTS.md).
			pay := m.Route(idemhttp.RouteOptions{Leased: true, Kind: PayoutKind})(http.HandlerFunc(s.createPayout))
			mux.Handle("POST /payouts", s.validatePayout(pay))
		}
	}
	// Request validation runs before the idempotency layer: a malformed
	// request is refused (400, 408, 413) and never recorded, so the
	// client's corrected retry with the same key runs.
	mux.Handle("POST /transfers", s.validateTransfer(create))
	s.handler = authenticate(s.bound(mux))
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// work returns the context a request's database work runs in: r's,
// bounded by Config.RequestTimeout from now. Handlers call it once the
// body has been read, so that a slow upload never eats into the work's
// time (the upload has its own bound, Config.BodyTimeout).
func (s *Service) work(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
}

// fail answers a request whose database work failed. Its transaction was
// rolled back (and, under idem, nothing was recorded), so nothing happened
// and a retry is safe: 503 with Retry-After, which clients retry, rather
// than a 500, which they must not.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.Logger.ErrorContext(r.Context(), "transfers: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusServiceUnavailable, "unavailable", "Service unavailable", "the request was not applied; retry it (with the same Idempotency-Key)")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ProblemBase is the prefix of the service's problem type URIs.
const ProblemBase = "https://idemkit.dev/problems/transfers/"

// maxDetail bounds a problem's detail, so that no answer grows with what
// the client sent: a 4xx stays small enough to be recorded and replayed.
const maxDetail = 256

func problem(w http.ResponseWriter, status int, kind, title, detail string) {
	if len(detail) > maxDetail {
		cut := maxDetail
		for cut > 0 && !utf8.RuneStart(detail[cut]) {
			cut--
		}
		detail = detail[:cut] + "…"
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": ProblemBase + kind, "title": title, "status": status, "detail": detail,
	})
}

// defaultIfZero sets *v to def when it is zero, and refuses a negative
// one, naming the field.
func defaultIfZero[T ~int | ~int64](v *T, def T, field string) error {
	switch {
	case *v < 0:
		return fmt.Errorf("transfers: %s must not be negative, got %v", field, *v)
	case *v == 0:
		*v = def
	}
	return nil
}
