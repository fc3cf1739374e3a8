// Package idemotel reports idem's work on OpenTelemetry traces, using only
// the OpenTelemetry API: it adds to the span already active in the request's
// context (the server span that otelhttp, otelgrpc or your own middleware
// started), and does nothing when there is none or it is not recording.
// The SDK and the exporter are the application's choice (idem serve uses
// OTLP when -otlp or OTEL_EXPORTER_OTLP_ENDPOINT is set).
//
// Two parts, used together or apart:
//
//   - Observer is an idem.Observer: give it to idemhttp.Config.Observer
//     and to idemgrpc.Config.Observer. For each protected request it sets
//     the attributes idem.outcome, idem.transport and idem.key_sha256
//     (idem.KeyHash, never the key) on the span and adds a span event
//     "idem.outcome" with the outcome, the transport, the key's hash, the
//     route, the status (HTTP) or code (gRPC) and the time the transport
//     took. An outcome that means the
//     server failed (unavailable, error, panic, response_too_large) sets
//     the span's status to Error.
//
//   - WrapStore wraps the idem.Store a Guard drives, and adds a span event
//     per store call: "idem.store.begin" (result: new, record, in_flight
//     or error), "idem.store.commit" (ok, conflict or error) and
//     "idem.store.rollback", each with its duration in milliseconds.
//
//     obs := idemotel.NewObserver()
//     guard, _ := idem.New(idemotel.WrapStore(store), nil)
//     mw, _ := idemhttp.New(guard, &idemhttp.Config{Observer: obs})
//
// See docs/ECOSYSTEM.md.
package idemotel

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idem"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys and event names this package writes.
const (
	AttrOutcome       = attribute.Key("idem.outcome")
	AttrTransport     = attribute.Key("idem.transport")
	AttrKeyHash       = attribute.Key("idem.key_sha256")
	AttrRoute         = attribute.Key("idem.route")
	AttrDurationMS    = attribute.Key("idem.duration_ms")
	AttrHTTPStatus    = attribute.Key("http.response.status_code")
	AttrGRPCCode      = attribute.Key("rpc.grpc.status_code")
	AttrStoreResult   = attribute.Key("idem.store.result")
	AttrStoreDuration = attribute.Key("idem.store.duration_ms")
	// AttrReplayCache is "hit" when the Guard answered from its replay
	// cache, without a store call, "miss" when it looked there and went on
	// to the store; AttrInFlightLocal is true on a duplicate the Guard
	// refused in process (docs/DESIGN.md#in-process).
	AttrReplayCache   = attribute.Key("idem.replay_cache")
	AttrInFlightLocal = attribute.Key("idem.in_flight_local")

	EventOutcome       = "idem.outcome"
	EventStoreBegin    = "idem.store.begin"
	EventStoreCommit   = "idem.store.commit"
	EventStoreRollback = "idem.store.rollback"
)

// Observer adds each outcome of idemhttp or idemgrpc to the active span.
// It is safe for concurrent use.
type Observer struct{}

var _ idem.Observer = (*Observer)(nil)

// NewObserver returns an Observer.
func NewObserver() *Observer { return &Observer{} }

// Observe implements idem.Observer.
func (*Observer) Observe(ctx context.Context, e idem.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{AttrOutcome.String(string(e.Outcome))}
	if e.Transport != "" {
		attrs = append(attrs, AttrTransport.String(string(e.Transport)))
	}
	if e.KeyHash != "" {
		attrs = append(attrs, AttrKeyHash.String(e.KeyHash))
	}
	span.SetAttributes(attrs...)
	attrs = append(attrs, AttrRoute.String(e.Route), AttrDurationMS.Float64(ms(e.Duration)))
	if e.ReplayCache != "" {
		attrs = append(attrs, AttrReplayCache.String(string(e.ReplayCache)))
	}
	if e.LocalInFlight {
		attrs = append(attrs, AttrInFlightLocal.Bool(true))
	}
	switch {
	case e.Transport == idem.TransportGRPC:
		attrs = append(attrs, AttrGRPCCode.Int(e.Status))
	case e.Status != 0:
		attrs = append(attrs, AttrHTTPStatus.Int(e.Status))
	}
	span.AddEvent(EventOutcome, trace.WithAttributes(attrs...))
	switch e.Outcome {
	case idem.OutcomeUnavailable, idem.OutcomeError, idem.OutcomePanic, idem.OutcomeResponseTooLarge, idem.OutcomeLeaseLost:
		span.SetStatus(codes.Error, "idem: "+string(e.Outcome))
	}
}

// Observers returns an Observer that tells each of obs in turn, for a
// middleware that feeds Prometheus and OpenTelemetry at once. Nil entries
// are skipped.
func Observers(obs ...idem.Observer) idem.Observer {
	return idem.ObserverFunc(func(ctx context.Context, e idem.Event) {
		for _, o := range obs {
			if o != nil {
				o.Observe(ctx, e)
			}
		}
	})
}

// WrapStore returns s with a span event for each store call on the span
// active in the call's context. Give the wrapped store to idem.New; keep
// using s itself for what needs its own type (the sweeper, leased mode,
// inspection). The store packages' TxFrom accessors see through the
// wrapper's transactions (they implement Unwrap() idem.Tx).
func WrapStore(s idem.Store) idem.Store { return &store{s} }

type store struct{ s idem.Store }

// Unwrap returns the wrapped store (Guard.Forget finds its Admin there).
func (w *store) Unwrap() idem.Store { return w.s }

func (w *store) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	start := time.Now()
	rec, tx, err := w.s.Begin(ctx, p)
	result := "new"
	switch {
	case errors.Is(err, idem.ErrInFlight):
		result = "in_flight"
	case err != nil:
		result = "error"
	case rec != nil:
		result = "record"
	}
	storeEvent(ctx, EventStoreBegin, start, result)
	if tx != nil {
		tx = &txWrap{tx}
	}
	return rec, tx, err
}

// txWrap times a transaction's end.
type txWrap struct{ tx idem.Tx }

func (t *txWrap) Handle() any     { return t.tx.Handle() }
func (t *txWrap) Unwrap() idem.Tx { return t.tx }

func (t *txWrap) Commit(ctx context.Context, p *idem.CommitParams) error {
	start := time.Now()
	err := t.tx.Commit(ctx, p)
	result := "ok"
	switch {
	case errors.Is(err, idem.ErrConflict):
		result = "conflict"
	case err != nil:
		result = "error"
	}
	storeEvent(ctx, EventStoreCommit, start, result)
	return err
}

func (t *txWrap) Rollback(ctx context.Context) error {
	start := time.Now()
	err := t.tx.Rollback(ctx)
	result := "ok"
	if err != nil {
		result = "error"
	}
	storeEvent(ctx, EventStoreRollback, start, result)
	return err
}

func storeEvent(ctx context.Context, name string, start time.Time, result string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(name, trace.WithAttributes(AttrStoreResult.String(result), AttrStoreDuration.Float64(ms(time.Since(start)))))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
