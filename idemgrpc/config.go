package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"google.golang.org/grpc/codes"
)

// MetadataKey is the request metadata key that carries the idempotency key.
const MetadataKey = "idempotency-key"

// ReplayedKey is the response header metadata key set to "true" on a replay.
const ReplayedKey = "idempotent-replayed"

// fingerprintMethod stands for the method in a call's fingerprint, where
// HTTP puts the request method. Changing it would make every recorded call
// a mismatch.
const fingerprintMethod = "gRPC"

// Config configures an Interceptor. A nil *Config is invalid: Methods must
// name the methods to protect.
type Config struct {
	// Methods are the unary methods the interceptor protects, by full
	// name ("/package.Service/Method"), each with its policy; calls of
	// any other method pass through untouched. It must not be empty: a
	// protected method requires a key, so protecting every method by
	// default would refuse health checks and reads.
	Methods map[string]MethodOptions

	// Scope returns the scope a call's key belongs to: the authenticated
	// principal or tenant. One scope never receives another's recorded
	// answer. idem.ErrNoPrincipal means the call has no principal (see
	// Anonymous); any other error answers Internal and runs nothing.
	// Defaults to DefaultScope, the principal that an earlier
	// interceptor stored with idem.WithPrincipal.
	Scope func(ctx context.Context, fullMethod string) (string, error)

	// Anonymous lets calls without a principal share
	// idem.AnonymousScope on every protected method, instead of being
	// refused. Such callers must use random keys. Defaults to false.
	Anonymous bool

	// Final reports whether a handler's error with this code is a final
	// answer, recorded with the effect and replayed to retries; any other
	// code rolls the effect back and records nothing. Defaults to
	// DefaultFinal.
	Final func(codes.Code) bool

	// MaxResponseSize is the largest response message, in bytes, that can
	// be recorded. A larger one is rolled back and answered Internal.
	// Defaults to 1 MiB.
	MaxResponseSize int

	// UnavailableRetryAfter is the retry delay that the RetryInfo of an
	// Unavailable answer (the store failed) carries. Defaults to 5
	// seconds.
	UnavailableRetryAfter time.Duration

	// Logger receives one line per outcome of a protected call, at the
	// outcome's level (idem.Outcome.Level: ordinary outcomes at Debug);
	// keys are never logged, only idem.KeyHash. Defaults to slog.Default()
	// at the time of each line.
	Logger *slog.Logger

	// Observer is told the outcome of every protected call, as an
	// idem.Event whose Transport is idem.TransportGRPC, Route the full
	// method name and Status the gRPC code, so that one observer
	// (idemprom, idemotel) serves HTTP and gRPC. Defaults to none.
	Observer idem.Observer
}

// MethodOptions is the policy of one protected method. The zero value is
// the default: a key is required, a principal too, and records live for the
// Guard's TTL.
type MethodOptions struct {
	// Optional lets a call without a key run unprotected. A present but
	// invalid key is still refused. Defaults to false: InvalidArgument.
	Optional bool

	// Anonymous lets calls without a principal share
	// idem.AnonymousScope on this method. Defaults to false.
	Anonymous bool

	// TTL overrides the Guard's record lifetime for this method. Defaults
	// to 0, the Guard's TTL.
	TTL time.Duration
}

// DefaultMaxResponseSize is the default Config.MaxResponseSize.
const DefaultMaxResponseSize = 1 << 20

// DefaultUnavailableRetryAfter is the default Config.UnavailableRetryAfter.
const DefaultUnavailableRetryAfter = 5 * time.Second

// DefaultFinal is the default Config.Final. A handler's answer is final,
// recorded and replayed, unless its code says the attempt failed for a
// reason a retry may not meet: Unknown (a plain Go error), Internal,
// Unavailable, DeadlineExceeded, Canceled, ResourceExhausted, Aborted and
// DataLoss roll back. OK and the business errors (InvalidArgument,
// NotFound, AlreadyExists, FailedPrecondition, PermissionDenied, ...) are
// recorded.
func DefaultFinal(c codes.Code) bool {
	switch c {
	case codes.Unknown, codes.Internal, codes.Unavailable, codes.DeadlineExceeded,
		codes.Canceled, codes.ResourceExhausted, codes.Aborted, codes.DataLoss:
		return false
	}
	return true
}

// DefaultScope is the default Config.Scope: the principal that
// authentication stored in ctx with idem.WithPrincipal (the same
// accessor serves HTTP and gRPC), or idem.ErrNoPrincipal.
func DefaultScope(ctx context.Context, _ string) (string, error) {
	if p, ok := idem.PrincipalFrom(ctx); ok {
		return p, nil
	}
	return "", idem.ErrNoPrincipal
}

func (c *Config) withDefaults() (Config, error) {
	if c == nil {
		return Config{}, errors.New("idemgrpc: Config is nil; Config.Methods must name the methods to protect")
	}
	out := *c
	out.Methods = make(map[string]MethodOptions, len(c.Methods))
	for m, o := range c.Methods {
		out.Methods[m] = o
	}
	if out.Scope == nil {
		out.Scope = DefaultScope
	}
	if out.Final == nil {
		out.Final = DefaultFinal
	}
	if out.MaxResponseSize == 0 {
		out.MaxResponseSize = DefaultMaxResponseSize
	}
	if out.UnavailableRetryAfter == 0 {
		out.UnavailableRetryAfter = DefaultUnavailableRetryAfter
	}
	return out, out.validate()
}

func (c *Config) validate() error {
	if len(c.Methods) == 0 {
		return errors.New("idemgrpc: Config.Methods is empty; name the methods to protect")
	}
	for m, o := range c.Methods {
		svc, name, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
		if !strings.HasPrefix(m, "/") || !ok || svc == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("idemgrpc: Config.Methods: %q is not a full method name (/package.Service/Method)", m)
		}
		if o.TTL < 0 {
			return fmt.Errorf("idemgrpc: Config.Methods[%q].TTL must not be negative, got %s", m, o.TTL)
		}
	}
	if c.MaxResponseSize < 0 {
		return fmt.Errorf("idemgrpc: Config.MaxResponseSize must not be negative, got %d", c.MaxResponseSize)
	}
	if c.UnavailableRetryAfter < 0 {
		return fmt.Errorf("idemgrpc: Config.UnavailableRetryAfter must not be negative, got %s", c.UnavailableRetryAfter)
	}
	return nil
}
