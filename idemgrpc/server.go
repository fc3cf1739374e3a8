package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Interceptor applies idem's contract to unary gRPC calls. It is safe for
// concurrent use; create one per Guard and configuration and share it.
type Interceptor struct {
	guard *idem.Guard
	cfg   Config
	// responses caches, per full method, how to decode a recorded
	// response (see response.go).
	responses sync.Map
}

// New returns an Interceptor that runs the protected methods' calls
// through guard. An invalid cfg is an error naming the field.
func New(guard *idem.Guard, cfg *Config) (*Interceptor, error) {
	if guard == nil {
		return nil, errors.New("idemgrpc: New: guard is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Interceptor{guard: guard, cfg: c}, nil
}

// UnaryServerInterceptor returns the interceptor New builds, for
// grpc.ChainUnaryInterceptor. Like http.ServeMux.Handle, it panics on a
// programming error: a nil guard or an invalid cfg. Put it after the
// interceptor that authenticates the caller (and calls
// idem.WithPrincipal), so that its refusals are never recorded.
func UnaryServerInterceptor(guard *idem.Guard, cfg *Config) grpc.UnaryServerInterceptor {
	i, err := New(guard, cfg)
	if err != nil {
		panic(err)
	}
	return i.Unary
}

// Unary is the grpc.UnaryServerInterceptor.
func (i *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	opts, ok := i.cfg.Methods[info.FullMethod]
	if !ok {
		return handler(ctx, req)
	}
	c := &call{i: i, ctx: ctx, method: info.FullMethod, opts: opts, start: time.Now()}
	key, present, err := incomingKey(ctx)
	switch {
	case !present && opts.Optional:
		resp, err := handler(ctx, req)
		c.done(idem.OutcomeUnprotected, status.Code(err), nil)
		return resp, err
	case !present:
		c.done(idem.OutcomeMissingKey, codes.InvalidArgument, nil)
		return nil, refusal(codes.InvalidArgument, ReasonMissingKey,
			"this method requires an "+MetadataKey+" metadata entry", 0)
	case err != nil:
		c.done(idem.OutcomeInvalidKey, codes.InvalidArgument, err)
		return nil, refusal(codes.InvalidArgument, ReasonInvalidKey,
			MetadataKey+" must be one value of 1 to 255 visible ASCII characters, bare or as an sf-string", 0)
	}
	c.keyHash = idem.KeyHash(key)
	scope, errResp := c.scope()
	if errResp != nil {
		return nil, errResp
	}
	msg, ok := req.(proto.Message)
	if !ok {
		err := fmt.Errorf("idemgrpc: the request of %s is a %T, not a proto.Message", info.FullMethod, req)
		c.done(idem.OutcomeError, codes.Internal, err)
		return nil, status.Error(codes.Internal, "idemgrpc: the request cannot be fingerprinted")
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		c.done(idem.OutcomeError, codes.Internal, err)
		return nil, status.Error(codes.Internal, "idemgrpc: the request cannot be fingerprinted")
	}
	r := idem.Request{
		Scope: scope,
		Key:   key,
		// The full method names the operation; the request message's
		// deterministic encoding is its canonical form.
		Fingerprint: idem.NewFingerprint(idem.FingerprintInput{Method: fingerprintMethod, Route: info.FullMethod, Body: body}),
		TTL:         opts.TTL,
	}
	return c.run(r, req, handler)
}

// incomingKey returns the key the call's metadata carries, and whether the
// entry is present at all. Two values, or an invalid one, are an error
// matching idem.ErrInvalidKey.
func incomingKey(ctx context.Context) (key string, present bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vs := md.Get(MetadataKey)
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		key, err := idem.ParseKey(vs[0])
		return key, true, err
	default:
		return "", true, fmt.Errorf("%w: the metadata entry has %d values", idem.ErrInvalidKey, len(vs))
	}
}

// call is one protected call on its way through the interceptor.
type call struct {
	i       *Interceptor
	ctx     context.Context
	method  string
	opts    MethodOptions
	start   time.Time
	keyHash string
	// info is what the Guard says of how it answered (idem.CallInfo).
	info idem.CallInfo

	// Set by the work.
	resp any
	err  error
}

// scope resolves the call's scope, or answers the call.
func (c *call) scope() (string, error) {
	scope, err := c.i.cfg.Scope(c.ctx, c.method)
	if err == nil && scope == "" {
		err = fmt.Errorf("%w: Config.Scope returned an empty scope", idem.ErrNoPrincipal)
	}
	switch {
	case err == nil:
		return scope, nil
	case errors.Is(err, idem.ErrNoPrincipal) && (c.i.cfg.Anonymous || c.opts.Anonymous):
		return idem.AnonymousScope, nil
	case errors.Is(err, idem.ErrNoPrincipal):
		c.done(idem.OutcomeNoPrincipal, codes.Internal, err)
		return "", refusal(codes.Internal, ReasonNoPrincipal,
			"the server could not tell who sent this call, so it cannot keep its key apart from other callers' keys; nothing was done", 0)
	default:
		c.done(idem.OutcomeError, codes.Internal, fmt.Errorf("idemgrpc: Config.Scope: %w", err))
		return "", status.Error(codes.Internal, "idemgrpc: the call's scope could not be resolved")
	}
}

// rolledBack is the work's error when the handler's answer is not final:
// the transaction rolls back and the handler's own error is sent.
type rolledBack struct{ err error }

func (e *rolledBack) Error() string { return "idemgrpc: handler failed: " + e.err.Error() }

var (
	errResponseTooLarge = errors.New("idemgrpc: the response is larger than Config.MaxResponseSize")
	errNotProto         = errors.New("idemgrpc: the response is not a proto.Message")
)

// run calls the guard: a replay, a refusal, or the handler inside the
// store's transaction.
func (c *call) run(r idem.Request, req any, handler grpc.UnaryHandler) (resp any, err error) {
	finished := false
	defer func() {
		if !finished {
			// The handler panicked: Guard.Do rolled back; the panic
			// goes on to the server's recovery interceptor, if any.
			c.done(idem.OutcomePanic, codes.Unknown, nil)
		}
	}()
	res, replayed, err := c.i.guard.Do(idem.WithCallInfo(c.ctx, &c.info), r, func(ctx context.Context) (idem.Result, error) {
		return c.work(ctx, req, handler)
	})
	finished = true
	if err == nil && replayed {
		return c.replay(res)
	}
	if err == nil {
		c.done(idem.OutcomeExecuted, status.Code(c.err), nil)
		return c.resp, c.err
	}
	return nil, c.refuse(err)
}

// work runs the handler in the transaction ctx carries and decides whether
// its answer is final.
func (c *call) work(ctx context.Context, req any, handler grpc.UnaryHandler) (idem.Result, error) {
	c.resp, c.err = handler(ctx, req)
	if c.err != nil {
		st := status.Convert(c.err)
		if st.Code() == codes.OK || !c.i.cfg.Final(st.Code()) {
			// A status error with code OK is a handler bug; treat it as
			// a failure, not as an answer.
			return idem.Result{}, &rolledBack{c.err}
		}
		b, err := proto.Marshal(st.Proto())
		if err != nil {
			return idem.Result{}, fmt.Errorf("idemgrpc: encode status: %w", err)
		}
		return idem.Result{Status: int(st.Code()), Body: b}, nil
	}
	msg, ok := c.resp.(proto.Message)
	if !ok {
		return idem.Result{}, fmt.Errorf("%w: %s answered a %T", errNotProto, c.method, c.resp)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return idem.Result{}, fmt.Errorf("idemgrpc: encode response: %w", err)
	}
	if len(b) > c.i.cfg.MaxResponseSize {
		return idem.Result{}, errResponseTooLarge
	}
	return idem.Result{Status: int(codes.OK), Body: b}, nil
}

// replay answers with the recorded answer, marked in the header metadata.
func (c *call) replay(res idem.Result) (any, error) {
	md := metadata.Pairs(ReplayedKey, "true")
	if err := grpc.SetHeader(c.ctx, md); err != nil {
		c.logger().LogAttrs(c.ctx, slog.LevelWarn, "idemgrpc: could not set the replay header", slog.String("error", err.Error()))
	}
	code := codes.Code(res.Status)
	if code != codes.OK {
		// An error sent without a message goes out as trailers only:
		// the marker rides in the trailer too.
		_ = grpc.SetTrailer(c.ctx, md)
		st, err := decodeStatus(res.Body)
		if err != nil {
			c.done(idem.OutcomeError, codes.Internal, err)
			return nil, status.Error(codes.Internal, "idemgrpc: the recorded answer cannot be decoded")
		}
		c.done(idem.OutcomeReplayed, code, nil)
		return nil, st.Err()
	}
	resp, err := c.i.decodeResponse(c.method, res.Body)
	if err != nil {
		c.done(idem.OutcomeError, codes.Internal, err)
		return nil, status.Error(codes.Internal, "idemgrpc: the recorded answer cannot be decoded")
	}
	c.done(idem.OutcomeReplayed, codes.OK, nil)
	return resp, nil
}

// refuse turns what the guard returned into the call's answer.
func (c *call) refuse(err error) error {
	var rb *rolledBack
	var ife *idem.InFlightError
	switch {
	case errors.As(err, &rb):
		code := status.Code(rb.err)
		c.done(idem.OutcomeRolledBack, code, nil)
		return rb.err
	case errors.Is(err, errResponseTooLarge):
		c.done(idem.OutcomeResponseTooLarge, codes.Internal, err)
		return refusal(codes.Internal, ReasonResponseTooLarge, "the response was too large to be recorded; nothing was done", 0)
	case errors.As(err, &ife):
		c.done(idem.OutcomeInFlight, codes.Aborted, nil)
		return refusal(codes.Aborted, ReasonInFlight,
			"another call with this key is being processed; retry after it completes", ife.RetryAfter)
	case errors.Is(err, idem.ErrMismatch):
		c.done(idem.OutcomeMismatch, codes.FailedPrecondition, nil)
		return refusal(codes.FailedPrecondition, ReasonKeyReused,
			"this key was already used with a different request; use a new key for a new request", 0)
	case errors.Is(err, idem.ErrUnavailable):
		if ctxErr := c.ctx.Err(); ctxErr != nil {
			// The caller left or its deadline ran out: the store failed
			// because of it, and the answer reaches nobody.
			st := status.FromContextError(ctxErr)
			c.done(idem.OutcomeCanceled, st.Code(), err)
			return st.Err()
		}
		c.done(idem.OutcomeUnavailable, codes.Unavailable, err)
		return refusal(codes.Unavailable, ReasonUnavailable,
			"the call was not processed; retry later with the same key", c.i.cfg.UnavailableRetryAfter)
	default:
		c.done(idem.OutcomeError, codes.Internal, err)
		return status.Error(codes.Internal, "idemgrpc: the call could not be processed; nothing was recorded")
	}
}

// done logs the outcome and tells the observer.
func (c *call) done(o idem.Outcome, code codes.Code, err error) {
	d := time.Since(c.start)
	level := o.Level()
	if logger := c.logger(); logger.Enabled(c.ctx, level) {
		attrs := []slog.Attr{
			slog.String("outcome", string(o)),
			slog.String("method", c.method),
			slog.String("code", code.String()),
		}
		if c.keyHash != "" {
			attrs = append(attrs, slog.String("key_sha256", c.keyHash))
		}
		attrs = append(attrs, slog.Duration("duration", d))
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		logger.LogAttrs(c.ctx, level, "idemgrpc: "+string(o), attrs...)
	}
	if obs := c.i.cfg.Observer; obs != nil {
		obs.Observe(c.ctx, idem.Event{
			Transport: idem.TransportGRPC, Outcome: o, Route: c.method, Status: int(code), Duration: d, KeyHash: c.keyHash,
			ReplayCache: c.info.ReplayCache, LocalInFlight: c.info.LocalInFlight,
		})
	}
}

func (c *call) logger() *slog.Logger {
	if c.i.cfg.Logger != nil {
		return c.i.cfg.Logger
	}
	return slog.Default()
}
