package idemgrpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/idemgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// retryPolicy is a service config whose retry policy retries Unavailable
// and Aborted up to 5 attempts.
const retryPolicy = `{"methodConfig": [{
	"name": [{"service": "idem.test.v1.Ledger"}],
	"retryPolicy": {
		"maxAttempts": 5,
		"initialBackoff": "0.01s",
		"maxBackoff": "0.05s",
		"backoffMultiplier": 2,
		"retryableStatusCodes": ["UNAVAILABLE", "ABORTED"]
	}
}]}`

// The client interceptor makes one key per call, and gRPC's own retry
// policy sends it on every attempt. The server fails the first attempt
// before the effect (rolled back), and loses the answer of the second
// after the effect committed (Unavailable in place of its answer); the
// third attempt is answered with the replay. One effect, one key (C1).
func TestClientRetryPolicyKeepsTheKey(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			attempt := 0
			// lose runs outside the idempotency interceptor: it drops the
			// answer of the second attempt, whose effect has committed.
			lose := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
				resp, err := handler(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				attempt++
				if attempt == 2 {
					if err != nil {
						t.Errorf("second attempt failed: %v", err)
					}
					return nil, status.Error(codes.Unavailable, "answer lost")
				}
				return resp, err
			}
			e := setup(t, options{open: b.open, outer: lose, dial: []grpc.DialOption{
				grpc.WithDefaultServiceConfig(retryPolicy),
				grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(nil)),
			}})
			first := true
			e.rpc.Before = func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				if first {
					first = false
					return status.Error(codes.Unavailable, "not now")
				}
				return nil
			}
			ctx := metadataCtx(t, "authorization", "Bearer ann")
			var header metadata.MD
			out, err := invokeTransfer(ctx, e.conn, transferRequest("alice", "bob", 100), grpc.Header(&header))
			if err != nil {
				t.Fatalf("the call failed after gRPC's retries: %v", err)
			}
			keys := e.seen()
			if len(keys) != 3 {
				t.Fatalf("%d attempts reached the server, want 3: %q", len(keys), keys)
			}
			for _, k := range keys {
				if k == "" || k != keys[0] {
					t.Fatalf("attempts carried keys %q, want one key on all", keys)
				}
			}
			if !replayed(header) {
				t.Fatalf("the third attempt was not a replay: header %v", header)
			}
			if got := e.transfers(); got != 1 {
				t.Fatalf("transfers = %d, want 1", got)
			}
			if got := e.balance("alice"); got != 900 {
				t.Fatalf("alice = %d, want 900", got)
			}
			if field(out, "id") != int64(1) {
				t.Fatalf("answer id = %v, want the one transfer's id 1", field(out, "id"))
			}

			// A second call is a second intent: a new key, a second effect.
			if _, err := invokeTransfer(ctx, e.conn, transferRequest("alice", "bob", 100)); err != nil {
				t.Fatal(err)
			}
			keys = e.seen()
			if keys[len(keys)-1] == keys[0] {
				t.Fatal("two calls shared a key")
			}
			if got := e.balance("alice"); got != 800 {
				t.Fatalf("alice = %d, want 800", got)
			}
		})
	}
}

// An application retry made with WithKey sends the intent's key again and
// gets the replay; an explicit metadata entry is left alone.
func TestClientWithKey(t *testing.T) {
	t.Parallel()
	e := setup(t, options{dial: []grpc.DialOption{grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(nil))}})
	ctx := idemgrpc.WithKey(metadataCtx(t, "authorization", "Bearer ann"), `intent"1"`)
	for i := range 2 {
		var header metadata.MD
		if _, err := invokeTransfer(ctx, e.conn, transferRequest("alice", "bob", 100), grpc.Header(&header)); err != nil {
			t.Fatal(err)
		}
		if got := replayed(header); got != (i == 1) {
			t.Fatalf("call %d replayed = %v", i, got)
		}
	}
	explicit := metadata.AppendToOutgoingContext(ctx, idemgrpc.MetadataKey, "own")
	if _, err := invokeTransfer(explicit, e.conn, transferRequest("alice", "bob", 100)); err != nil {
		t.Fatal(err)
	}
	keys := e.seen()
	if want := []string{`"intent\"1\""`, `"intent\"1\""`, "own"}; len(keys) != 3 || keys[0] != want[0] || keys[1] != want[1] || keys[2] != want[2] {
		t.Fatalf("keys sent = %q, want %q", keys, want)
	}
	if got := e.balance("alice"); got != 800 {
		t.Fatalf("alice = %d, want 800", got)
	}
	bad := idemgrpc.WithKey(ctx, "")
	if _, err := invokeTransfer(bad, e.conn, transferRequest("alice", "bob", 100)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty key: %v, want InvalidArgument", err)
	}
	if len(e.seen()) != 3 {
		t.Fatal("a call with an invalid key was sent")
	}
}

func metadataCtx(t *testing.T, kv ...string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func incoming(kv ...string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
}
