package idemgrpc_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/dynamicpb"
)

type backend struct {
	name string
	open func(t *testing.T) (idem.Store, *ledger)
}

func backends() []backend {
	return []backend{
		{"SQLite", openSQLite},
		{"Postgres", func(t *testing.T) (idem.Store, *ledger) {
			schema, dsn := pgtest.Schema(t)
			s, err := pgstore.Open(context.Background(), dsn, &pgstore.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, pgLedger(t, s)
		}},
	}
}

func openSQLite(t *testing.T) (idem.Store, *ledger) {
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "bank.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, sqliteLedger(t, s)
}

// env is the test ledger (fixture_test.go) behind a real gRPC server on
// 127.0.0.1, with an authentication (metadata "authorization: Bearer
// <name>") before the idempotency interceptor.
type env struct {
	t      *testing.T
	store  idem.Store
	rpc    *ledger
	conn   *grpc.ClientConn
	events *events

	mu       sync.Mutex
	attempts []string // the key of every call that reached the server, in order
}

type options struct {
	cfg      func(*idemgrpc.Config)
	outer    grpc.UnaryServerInterceptor // runs first, before authentication
	dial     []grpc.DialOption
	open     func(t *testing.T) (idem.Store, *ledger)
	accounts map[string]int64
}

func setup(t *testing.T, o options) *env {
	t.Helper()
	if o.open == nil {
		o.open = openSQLite
	}
	store, l := o.open(t)
	guard, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: store, rpc: l, events: &events{}}
	accounts := o.accounts
	if accounts == nil {
		accounts = map[string]int64{"alice": 1000, "bob": 0}
	}
	for id, balance := range accounts {
		e.setBalance(id, balance)
	}
	cfg := &idemgrpc.Config{
		Methods:  map[string]idemgrpc.MethodOptions{transferMethod: {}},
		Observer: e.events,
		Logger:   slog.New(slog.DiscardHandler),
	}
	if o.cfg != nil {
		o.cfg(cfg)
	}
	interceptor, err := idemgrpc.New(guard, cfg)
	if err != nil {
		t.Fatal(err)
	}
	chain := []grpc.UnaryServerInterceptor{e.count}
	if o.outer != nil {
		chain = append(chain, o.outer)
	}
	chain = append(chain, authenticate, interceptor.Unary)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(chain...))
	srv.RegisterService(&ledgerDesc, e.rpc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, o.dial...)
	conn, err := grpc.NewClient(lis.Addr().String(), dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.conn = conn
	return e
}

// count records the key of every call that reaches the server.
func (e *env) count(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	e.mu.Lock()
	e.attempts = append(e.attempts, strings.Join(md.Get(idemgrpc.MetadataKey), ","))
	e.mu.Unlock()
	return handler(ctx, req)
}

func (e *env) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.attempts...)
}

// authenticate names the principal after the bearer token, as a test may.
func authenticate(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) == 1 {
		if token, ok := strings.CutPrefix(v[0], "Bearer "); ok && token != "" {
			ctx = idem.WithPrincipal(ctx, "bearer:"+token)
		}
	}
	return handler(ctx, req)
}

// call makes one transfer call as principal with key (none when empty),
// and returns the answer and its header and trailer metadata.
func (e *env) call(principal, key string, from, to string, amount int64) (*dynamicpb.Message, metadata.MD, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pairs []string
	if principal != "" {
		pairs = append(pairs, "authorization", "Bearer "+principal)
	}
	if key != "" {
		pairs = append(pairs, idemgrpc.MetadataKey, key)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, pairs...)
	var header, trailer metadata.MD
	out, err := invokeTransfer(ctx, e.conn, transferRequest(from, to, amount), grpc.Header(&header), grpc.Trailer(&trailer))
	return out, metadata.Join(header, trailer), err
}

func replayed(md metadata.MD) bool {
	v := md.Get(idemgrpc.ReplayedKey)
	return len(v) > 0 && v[0] == "true"
}

func (e *env) setBalance(id string, balance int64) {
	e.t.Helper()
	if err := e.rpc.setOpening(context.Background(), id, balance); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) balance(id string) int64 {
	e.t.Helper()
	b, err := e.rpc.balance(context.Background(), e.rpc.db, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) transfers() int {
	e.t.Helper()
	n, err := e.rpc.count(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return int(n)
}

// events collects what the interceptor tells its observer.
type events struct {
	mu   sync.Mutex
	list []idem.Event
}

func (o *events) Observe(_ context.Context, e idem.Event) {
	o.mu.Lock()
	o.list = append(o.list, e)
	o.mu.Unlock()
}

func (o *events) outcomes() []idem.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []idem.Outcome
	for _, e := range o.list {
		out = append(out, e.Outcome)
	}
	return out
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func codeOf(c uint32) codes.Code { return codes.Code(c) }
