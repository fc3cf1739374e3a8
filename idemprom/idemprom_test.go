package idemprom_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func setup(t *testing.T) (*prometheus.Registry, http.Handler) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	obs, err := idemprom.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(g, &idemhttp.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return reg, mw.Handler(created)
}

var created = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusCreated)
})

func post(h http.Handler, key, body string) {
	r := httptest.NewRequest("POST", "/x", strings.NewReader(body))
	r = r.WithContext(idem.WithPrincipal(r.Context(), "user:42"))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
}

func TestCountsAndLatencyPerOutcome(t *testing.T) {
	t.Parallel()
	reg, h := setup(t)
	post(h, "k", "a")
	post(h, "k", "a")
	post(h, "k", "a")
	post(h, "k", "b")
	post(h, "", "a")

	want := `
# HELP idem_requests_total Protected requests and calls, by transport and outcome.
# TYPE idem_requests_total counter
idem_requests_total{outcome="bad_request",transport="grpc"} 0
idem_requests_total{outcome="canceled",transport="grpc"} 0
idem_requests_total{outcome="error",transport="grpc"} 0
idem_requests_total{outcome="executed",transport="grpc"} 0
idem_requests_total{outcome="fail_open",transport="grpc"} 0
idem_requests_total{outcome="in_flight",transport="grpc"} 0
idem_requests_total{outcome="invalid_key",transport="grpc"} 0
idem_requests_total{outcome="lease_lost",transport="grpc"} 0
idem_requests_total{outcome="mismatch",transport="grpc"} 0
idem_requests_total{outcome="missing_key",transport="grpc"} 0
idem_requests_total{outcome="no_principal",transport="grpc"} 0
idem_requests_total{outcome="panic",transport="grpc"} 0
idem_requests_total{outcome="released",transport="grpc"} 0
idem_requests_total{outcome="replayed",transport="grpc"} 0
idem_requests_total{outcome="request_timeout",transport="grpc"} 0
idem_requests_total{outcome="response_too_large",transport="grpc"} 0
idem_requests_total{outcome="rolled_back",transport="grpc"} 0
idem_requests_total{outcome="too_busy",transport="grpc"} 0
idem_requests_total{outcome="too_large",transport="grpc"} 0
idem_requests_total{outcome="unavailable",transport="grpc"} 0
idem_requests_total{outcome="unprotected",transport="grpc"} 0
idem_requests_total{outcome="bad_request",transport="http"} 0
idem_requests_total{outcome="canceled",transport="http"} 0
idem_requests_total{outcome="error",transport="http"} 0
idem_requests_total{outcome="executed",transport="http"} 1
idem_requests_total{outcome="fail_open",transport="http"} 0
idem_requests_total{outcome="in_flight",transport="http"} 0
idem_requests_total{outcome="invalid_key",transport="http"} 0
idem_requests_total{outcome="lease_lost",transport="http"} 0
idem_requests_total{outcome="mismatch",transport="http"} 1
idem_requests_total{outcome="missing_key",transport="http"} 1
idem_requests_total{outcome="no_principal",transport="http"} 0
idem_requests_total{outcome="panic",transport="http"} 0
idem_requests_total{outcome="released",transport="http"} 0
idem_requests_total{outcome="replayed",transport="http"} 2
idem_requests_total{outcome="request_timeout",transport="http"} 0
idem_requests_total{outcome="response_too_large",transport="http"} 0
idem_requests_total{outcome="rolled_back",transport="http"} 0
idem_requests_total{outcome="too_busy",transport="http"} 0
idem_requests_total{outcome="too_large",transport="http"} 0
idem_requests_total{outcome="unavailable",transport="http"} 0
idem_requests_total{outcome="unprotected",transport="http"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idem_requests_total"); err != nil {
		t.Error(err)
	}
	if got, want := testutil.CollectAndCount(reg, "idem_request_duration_seconds"), 2*len(idem.Outcomes()); got != want {
		t.Errorf("histogram series: got %d, want %d", got, want)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "idem_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels(m) == "outcome=replayed,transport=http" {
				if got, want := m.GetHistogram().GetSampleCount(), uint64(2); got != want {
					t.Errorf("replayed latency samples: got %d, want %d", got, want)
				}
			}
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	if _, err := idemprom.New(nil, &idemprom.Config{Buckets: []float64{1, 0.5}}); err == nil || !strings.Contains(err.Error(), "Config.Buckets") {
		t.Errorf("unordered buckets: got %v, want an error naming Config.Buckets", err)
	}
	if _, err := idemprom.New(nil, &idemprom.Config{Buckets: []float64{}}); err == nil {
		t.Errorf("empty buckets: got no error")
	}
	reg := prometheus.NewRegistry()
	if _, err := idemprom.New(reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := idemprom.New(reg, nil); err == nil {
		t.Errorf("registering twice: got no error")
	}
	if _, err := idemprom.New(reg, &idemprom.Config{Namespace: "other"}); err != nil {
		t.Errorf("another namespace: got %v", err)
	}
}

func TestGuardShortcutCounters(t *testing.T) {
	t.Parallel()
	reg, h := setup(t)
	post(h, "k", "a") // executed: a miss
	post(h, "k", "a") // replayed from the cache: a hit
	post(h, "k", "b") // mismatch from the cache: a hit
	post(h, "", "a")  // missing key: never reaches the Guard
	want := `
# HELP idem_replay_cache_hits_total Protected requests the Guard answered from its replay cache, without a store call, by transport.
# TYPE idem_replay_cache_hits_total counter
idem_replay_cache_hits_total{transport="grpc"} 0
idem_replay_cache_hits_total{transport="http"} 2
# HELP idem_replay_cache_misses_total Protected requests the Guard looked up in its replay cache and sent on to the store, by transport.
# TYPE idem_replay_cache_misses_total counter
idem_replay_cache_misses_total{transport="grpc"} 0
idem_replay_cache_misses_total{transport="http"} 1
# HELP idem_in_flight_local_total Duplicates refused in flight because this process was running their key, without a store call, by transport.
# TYPE idem_in_flight_local_total counter
idem_in_flight_local_total{transport="grpc"} 0
idem_in_flight_local_total{transport="http"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"idem_replay_cache_hits_total", "idem_replay_cache_misses_total", "idem_in_flight_local_total"); err != nil {
		t.Error(err)
	}
	obs, err := idemprom.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs.Observe(t.Context(), idem.Event{Transport: idem.TransportGRPC, Outcome: idem.OutcomeInFlight, LocalInFlight: true, ReplayCache: idem.CacheMiss})
	if got := testutil.ToFloat64(obs.Collectors()[4].(*prometheus.CounterVec).WithLabelValues("grpc")); got != 1 {
		t.Errorf("in_flight_local_total after a local refusal = %g, want 1", got)
	}
}

// labels renders a series' labels as name=value pairs, in order.
func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

// One Observer given to idemhttp and to idemgrpc counts each transport
// under its own label: a gRPC call never lands in HTTP's series.
func TestOneObserverForBothTransports(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	obs, err := idemprom.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	guard, err := idem.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}

	// HTTP: executed, replayed.
	mw, err := idemhttp.New(guard, &idemhttp.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(created)
	post(h, "h1", "a")
	post(h, "h1", "a")

	// gRPC over a real server on loopback: executed, replayed, replayed,
	// and one call without a key.
	const method = "/test.Echo/Say"
	icpt, err := idemgrpc.New(guard, &idemgrpc.Config{Methods: map[string]idemgrpc.MethodOptions{method: {}}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(idem.WithPrincipal(ctx, "user:42"), req)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, icpt.Unary))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Say",
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: method}, func(_ context.Context, req any) (any, error) {
					return req, nil
				})
			},
		}},
	}, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for i, key := range []string{"g1", "g1", "g1", ""} {
		ctx := t.Context()
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.MetadataKey, key)
		}
		err := conn.Invoke(ctx, method, wrapperspb.String("hi"), new(wrapperspb.StringValue))
		if (err == nil) != (key != "") {
			t.Fatalf("call %d (key %q): %v", i, key, err)
		}
	}

	for _, tc := range []struct {
		transport, outcome string
		want               float64
	}{
		{"http", "executed", 1}, {"http", "replayed", 1}, {"http", "missing_key", 0},
		{"grpc", "executed", 1}, {"grpc", "replayed", 2}, {"grpc", "missing_key", 1},
	} {
		c, err := findCounter(reg, "idem_requests_total", tc.transport, tc.outcome)
		if err != nil {
			t.Fatal(err)
		}
		if c != tc.want {
			t.Errorf("idem_requests_total{transport=%q,outcome=%q} = %g, want %g", tc.transport, tc.outcome, c, tc.want)
		}
	}
	want := `
# HELP idem_replay_cache_hits_total Protected requests the Guard answered from its replay cache, without a store call, by transport.
# TYPE idem_replay_cache_hits_total counter
idem_replay_cache_hits_total{transport="grpc"} 2
idem_replay_cache_hits_total{transport="http"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idem_replay_cache_hits_total"); err != nil {
		t.Error(err)
	}
}

// findCounter reads one series of a counter with transport and outcome
// labels back from the registry.
func findCounter(reg prometheus.Gatherer, name, transport, outcome string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels(m) == "outcome="+outcome+",transport="+transport {
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, nil
}
