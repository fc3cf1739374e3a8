package idemotel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqlitestore"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func tracer(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp.Tracer("idemotel_test"), rec
}

// spanned starts a server span per request, as otelhttp would.
func spanned(tr trace.Tracer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tr.Start(r.Context(), r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(idem.WithPrincipal(ctx, "user:1")))
	})
}

// spanView is what a test checks of one ended span.
type spanView struct {
	attrs  map[attribute.Key]attribute.Value
	events map[string]map[attribute.Key]attribute.Value
	status codes.Code
}

func view(s sdktrace.ReadOnlySpan) spanView {
	v := spanView{attrs: map[attribute.Key]attribute.Value{}, events: map[string]map[attribute.Key]attribute.Value{}, status: s.Status().Code}
	for _, a := range s.Attributes() {
		v.attrs[a.Key] = a.Value
	}
	for _, e := range s.Events() {
		m := map[attribute.Key]attribute.Value{}
		for _, a := range e.Attributes {
			m[a.Key] = a.Value
		}
		v.events[e.Name] = m
	}
	return v
}

// checkOutcome asserts that a span carries the outcome and the key's hash
// as attributes and in its idem.outcome event, and the store events named
// with their results.
// checkInProcess checks the outcome event's attributes of the Guard's
// in-process answers, and that the store was not called for one.
func checkInProcess(t *testing.T, s spanView, cache string, local bool) {
	t.Helper()
	ev := s.events[idemotel.EventOutcome]
	if got := ev[idemotel.AttrReplayCache].AsString(); got != cache {
		t.Errorf("%s = %q, want %q", idemotel.AttrReplayCache, got, cache)
	}
	if got := ev[idemotel.AttrInFlightLocal].AsBool(); got != local {
		t.Errorf("%s = %v, want %v", idemotel.AttrInFlightLocal, got, local)
	}
	if cache == "hit" || local {
		if _, ok := s.events[idemotel.EventStoreBegin]; ok {
			t.Errorf("a store call for an answer given in process: %v", s.events)
		}
	}
}

// checkTransport checks that the span and its outcome event name the
// transport the request came by.
func checkTransport(t *testing.T, s spanView, want idem.Transport) {
	t.Helper()
	if got := s.attrs[idemotel.AttrTransport].AsString(); got != string(want) {
		t.Errorf("span attribute %s = %q, want %q", idemotel.AttrTransport, got, want)
	}
	if got := s.events[idemotel.EventOutcome][idemotel.AttrTransport].AsString(); got != string(want) {
		t.Errorf("event attribute %s = %q, want %q", idemotel.AttrTransport, got, want)
	}
}

func checkOutcome(t *testing.T, s spanView, outcome idem.Outcome, key string, store map[string]string) {
	t.Helper()
	if got := s.attrs[idemotel.AttrOutcome].AsString(); got != string(outcome) {
		t.Errorf("span attribute %s = %q, want %q", idemotel.AttrOutcome, got, outcome)
	}
	if got := s.attrs[idemotel.AttrKeyHash].AsString(); got != idem.KeyHash(key) {
		t.Errorf("span attribute %s = %q, want %q", idemotel.AttrKeyHash, got, idem.KeyHash(key))
	}
	ev, ok := s.events[idemotel.EventOutcome]
	if !ok {
		t.Fatalf("no %s event; events %v", idemotel.EventOutcome, s.events)
	}
	if got := ev[idemotel.AttrOutcome].AsString(); got != string(outcome) {
		t.Errorf("event outcome = %q, want %q", got, outcome)
	}
	if ev[idemotel.AttrDurationMS].AsFloat64() <= 0 {
		t.Errorf("event duration %v, want positive", ev[idemotel.AttrDurationMS])
	}
	for name, result := range store {
		se, ok := s.events[name]
		if !ok {
			t.Errorf("no %s event; events %v", name, s.events)
			continue
		}
		if got := se[idemotel.AttrStoreResult].AsString(); got != result {
			t.Errorf("%s result = %q, want %q", name, got, result)
		}
		if se[idemotel.AttrStoreDuration].AsFloat64() <= 0 {
			t.Errorf("%s duration %v, want positive", name, se[idemotel.AttrStoreDuration])
		}
	}
}

// Spans of idemhttp requests carry the outcome (executed, replayed,
// in_flight, mismatch, unavailable), the key's hash and the store's
// timings; the handler still reaches sqlitestore's transaction through the
// wrapped store.
func TestHTTPSpans(t *testing.T) {
	t.Parallel()
	tr, rec := tracer(t)
	store, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "otel.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.DB().Exec(`CREATE TABLE effects (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	guard, _ := idem.New(idemotel.WrapStore(store), nil)
	mw, err := idemhttp.New(guard, &idemhttp.Config{Observer: idemotel.NewObserver(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := spanned(tr, mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := sqlitestore.TxFrom(r.Context())
		if !ok {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		if r.Header.Get("Idempotency-Key") == "slow" {
			close(entered)
			<-release
		}
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO effects VALUES (1)`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(key, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/transfers", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	ended := func() spanView {
		t.Helper()
		spans := rec.Ended()
		return view(spans[len(spans)-1])
	}

	if got := post("k1", "a"); got != http.StatusCreated {
		t.Fatalf("first: %d", got)
	}
	first := ended()
	checkOutcome(t, first, idem.OutcomeExecuted, "k1", map[string]string{idemotel.EventStoreBegin: "new", idemotel.EventStoreCommit: "ok"})
	checkTransport(t, first, idem.TransportHTTP)
	post("k1", "a")
	s := ended()
	// The Guard answers the retry from memory: no store call, and the
	// outcome event says so.
	checkOutcome(t, s, idem.OutcomeReplayed, "k1", nil)
	checkInProcess(t, s, "hit", false)
	if got := s.events[idemotel.EventOutcome][idemotel.AttrHTTPStatus].AsInt64(); got != 201 {
		t.Errorf("replay status attribute = %d, want 201", got)
	}
	post("k1", "b")
	s = ended()
	checkOutcome(t, s, idem.OutcomeMismatch, "k1", nil)
	checkInProcess(t, s, "hit", false)

	done := make(chan int, 1)
	go func() { done <- post("slow", "a") }()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow request never ran")
	}
	if got := post("slow", "a"); got != http.StatusConflict {
		t.Fatalf("in flight: %d", got)
	}
	s = ended()
	checkOutcome(t, s, idem.OutcomeInFlight, "slow", nil)
	checkInProcess(t, s, "miss", true)
	close(release)
	<-done

	store.Close()
	if got := post("k9", "a"); got != http.StatusServiceUnavailable {
		t.Fatalf("store closed: %d", got)
	}
	s = ended()
	checkOutcome(t, s, idem.OutcomeUnavailable, "k9", map[string]string{idemotel.EventStoreBegin: "error"})
	if s.status != codes.Error {
		t.Errorf("unavailable span status = %v, want Error", s.status)
	}
}

// Spans of idemgrpc calls carry the outcome, the key's hash and the gRPC
// code, through the same Observer.
func TestGRPCSpans(t *testing.T) {
	t.Parallel()
	tr, rec := tracer(t)
	guard, _ := idem.New(idemotel.WrapStore(memstore.New()), nil)
	const method = "/test.Echo/Say"
	i, err := idemgrpc.New(guard, &idemgrpc.Config{
		Methods:  map[string]idemgrpc.MethodOptions{method: {}},
		Observer: idemotel.Observers(idemotel.NewObserver(), nil),
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	var spans sync.WaitGroup
	startSpan := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		spans.Add(1)
		defer spans.Done()
		ctx, span := tr.Start(ctx, info.FullMethod, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		return handler(idem.WithPrincipal(ctx, "user:1"), req)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(startSpan, i.Unary))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Say", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: method}, func(ctx context.Context, req any) (any, error) {
				return wrapperspb.String("said " + req.(*wrapperspb.StringValue).Value), nil
			})
		}}},
	}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	say := func(key, text string) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), idemgrpc.MetadataKey, key), 30*time.Second)
		defer cancel()
		conn.Invoke(ctx, method, wrapperspb.String(text), new(wrapperspb.StringValue))
		spans.Wait()
	}
	ended := func() spanView {
		all := rec.Ended()
		return view(all[len(all)-1])
	}
	say("g1", "hi")
	first := ended()
	checkOutcome(t, first, idem.OutcomeExecuted, "g1", map[string]string{idemotel.EventStoreBegin: "new", idemotel.EventStoreCommit: "ok"})
	checkTransport(t, first, idem.TransportGRPC)
	say("g1", "hi")
	s := ended()
	checkOutcome(t, s, idem.OutcomeReplayed, "g1", nil)
	checkInProcess(t, s, "hit", false)
	if got := s.events[idemotel.EventOutcome][idemotel.AttrGRPCCode].AsInt64(); got != 0 {
		t.Errorf("grpc code attribute = %d, want 0", got)
	}
	say("g1", "ho")
	s = ended()
	checkOutcome(t, s, idem.OutcomeMismatch, "g1", nil)
	if got := s.events[idemotel.EventOutcome][idemotel.AttrGRPCCode].AsInt64(); got != 9 {
		t.Errorf("grpc code attribute = %d, want 9 (FailedPrecondition)", got)
	}
}

// Without a recording span, nothing is added and nothing fails.
func TestNoSpan(t *testing.T) {
	t.Parallel()
	idemotel.NewObserver().Observe(context.Background(), idem.Event{Outcome: idem.OutcomeExecuted})
	guard, _ := idem.New(idemotel.WrapStore(memstore.New()), nil)
	_, _, err := guard.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		if _, ok := memstore.TxFrom(ctx); !ok {
			t.Error("memstore.TxFrom does not see through the wrapper")
		}
		return idem.Result{Status: 200}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// With the Guard's in-process answers off, replays and refusals reach the
// wrapped store, whose events name them.
func TestStoreEventsWithoutShortcuts(t *testing.T) {
	t.Parallel()
	tr, rec := tracer(t)
	ms := memstore.New()
	guard, err := idem.New(idemotel.WrapStore(ms), &idem.Config{ReplayCacheBytes: -1, DisableLocalInFlight: true})
	if err != nil {
		t.Fatal(err)
	}
	do := func() {
		ctx, span := tr.Start(context.Background(), "call")
		defer span.End()
		_, _, _ = guard.Do(ctx, idem.Request{Scope: "s", Key: "k"}, func(context.Context) (idem.Result, error) {
			return idem.Result{Status: 201}, nil
		})
	}
	last := func() spanView {
		all := rec.Ended()
		return view(all[len(all)-1])
	}
	do()
	do()
	if got := last().events[idemotel.EventStoreBegin][idemotel.AttrStoreResult].AsString(); got != "record" {
		t.Errorf("replay: store begin result %q, want record", got)
	}
	_, held, err := ms.Begin(context.Background(), &idem.BeginParams{Scope: "s", Key: "held", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(context.Background())
	ctx, span := tr.Start(context.Background(), "call")
	_, _, err = guard.Do(ctx, idem.Request{Scope: "s", Key: "held"}, func(context.Context) (idem.Result, error) { return idem.Result{}, nil })
	span.End()
	if !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("held key: %v, want ErrInFlight", err)
	}
	if got := last().events[idemotel.EventStoreBegin][idemotel.AttrStoreResult].AsString(); got != "in_flight" {
		t.Errorf("held key: store begin result %q, want in_flight", got)
	}
}
