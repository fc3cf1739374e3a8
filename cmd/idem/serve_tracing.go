package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/idemotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracing is idem serve's OpenTelemetry: off (nil) unless an OTLP endpoint
// is configured with -otlp or OTEL_EXPORTER_OTLP_ENDPOINT. When on, every
// request gets a server span (continuing the caller's W3C traceparent),
// idemotel puts the idempotency outcome, the key's hash and the store's
// timings on it, and spans are exported over OTLP/HTTP in batches.
type tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// otlpEndpointEnv is the standard variable naming the collector's base URL.
const otlpEndpointEnv = "OTEL_EXPORTER_OTLP_ENDPOINT"

// setupTracing starts the exporter when endpoint (or, if it is empty, the
// environment) names a collector, and adds idemotel's observer to cfg.
func setupTracing(ctx context.Context, endpoint string, cfg *transfers.Config, log *slog.Logger) (*tracing, error) {
	var opts []otlptracehttp.Option
	switch {
	case endpoint != "":
		u, err := otlpURL(endpoint)
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	case os.Getenv(otlpEndpointEnv) != "":
		// The exporter reads the OTEL_EXPORTER_OTLP_* variables itself.
	default:
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("serve: OTLP exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "idem"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	cfg.Observer = idemotel.Observers(cfg.Observer, idemotel.NewObserver())
	log.Info("idem serve: exporting traces over OTLP", "endpoint", redact(firstNonEmpty(endpoint, os.Getenv(otlpEndpointEnv))))
	return &tracing{tp: tp, tracer: tp.Tracer("github.com/idemkit/idem/cmd/idem")}, nil
}

// otlpURL returns the traces URL of -otlp, or a usage error: a base URL,
// as in OTEL_EXPORTER_OTLP_ENDPOINT, gets OTLP/HTTP's path /v1/traces.
func otlpURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageError{fmt.Sprintf("serve: -otlp must be an http:// or https:// URL, got %q", endpoint)}
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// store returns the store the guard should drive: s, with span events for
// its calls when tracing is on.
func (t *tracing) store(s idem.Store) idem.Store {
	if t == nil {
		return s
	}
	return idemotel.WrapStore(s)
}

// handler starts a server span per request when tracing is on.
func (t *tracing) handler(next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// shutdown flushes the spans not yet exported, waiting at most 5 seconds.
func (t *tracing) shutdown(log *slog.Logger) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		log.Warn("idem serve: flushing traces", "err", err)
	}
}
