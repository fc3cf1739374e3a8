package idemprom_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memstore"
)

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
