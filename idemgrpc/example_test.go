package idemgrpc_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/memstore"
)

// deposits counts the effects of the example's Deposit method.
var deposits atomic.Int64

// bank is a hand-written service description with one unary method,
// /example.Bank/Deposit (generated code would provide it).
var bank = grpc.ServiceDesc{
	ServiceName: "example.Bank",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Deposit",
		Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.Int64Value)
			if err := dec(in); err != nil {
				return nil, err
			}
			deposit := func(ctx context.Context, req any) (any, error) {
				n := deposits.Add(1) // the effect, once per key
				return wrapperspb.String(fmt.Sprintf("deposit #%d of %d", n, req.(*wrapperspb.Int64Value).Value)), nil
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/example.Bank/Deposit"}, deposit)
		},
	}},
}

// The server protects Deposit; the client sends the same key on both
// calls of one intent, and the second call gets the first answer.
func Example() {
	guard, _ := idem.New(memstore.New(), nil) // sqlitestore or pgstore in production
	protect, _ := idemgrpc.New(guard, &idemgrpc.Config{
		Methods: map[string]idemgrpc.MethodOptions{"/example.Bank/Deposit": {}},
	})
	// Authentication runs first and hands idemgrpc the principal.
	auth := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(idem.WithPrincipal(ctx, "user:alice"), req)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, protect.Unary))
	srv.RegisterService(&bank, struct{}{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Stop()

	conn, _ := grpc.NewClient(ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(nil)))
	defer conn.Close()

	ctx := idemgrpc.WithKey(context.Background(), "deposit-2026-11-30-001") // one key per intent
	for range 2 {
		var header metadata.MD
		out := new(wrapperspb.StringValue)
		err := conn.Invoke(ctx, "/example.Bank/Deposit", wrapperspb.Int64(50), out, grpc.Header(&header))
		fmt.Println(out.GetValue(), err, "replayed:", header.Get(idemgrpc.ReplayedKey))
	}
	fmt.Println("deposits made:", deposits.Load())
	// Output:
	// deposit #1 of 50 <nil> replayed: []
	// deposit #1 of 50 <nil> replayed: [true]
	// deposits made: 1
}
