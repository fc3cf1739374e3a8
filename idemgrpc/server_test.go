package idemgrpc_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/memstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The transfer runs once per key and every retry gets the first answer,
// marked idempotent-replayed, on both atomic stores (DESIGN E1, E4).
func TestTransferRunsOnceAndIsReplayed(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{open: b.open})
			first, md, err := e.call("ann", "k1", "alice", "bob", 100)
			if err != nil {
				t.Fatal(err)
			}
			if replayed(md) {
				t.Fatal("the first answer is marked replayed")
			}
			for range 3 {
				again, md, err := e.call("ann", "k1", "alice", "bob", 100)
				if err != nil {
					t.Fatal(err)
				}
				if !replayed(md) {
					t.Fatalf("retry not marked %s: true; header %v", idemgrpc.ReplayedKey, md)
				}
				if got, want := field(again, "id"), field(first, "id"); got != want {
					t.Fatalf("replayed id = %v, want %v", got, want)
				}
				if got, want := field(again, "created_at"), field(first, "created_at"); got != want {
					t.Fatalf("replayed created_at = %v, want %v", got, want)
				}
			}
			if got := e.balance("alice"); got != 900 {
				t.Fatalf("alice = %d, want 900 (one transfer)", got)
			}
			if got := e.transfers(); got != 1 {
				t.Fatalf("transfers = %d, want 1", got)
			}
			want := []idem.Outcome{idem.OutcomeExecuted, idem.OutcomeReplayed, idem.OutcomeReplayed, idem.OutcomeReplayed}
			if got := e.events.outcomes(); !slices.Equal(got, want) {
				t.Fatalf("outcomes = %v, want %v", got, want)
			}
		})
	}
}

// A business error is a final answer: recorded with the (absent) effect
// and replayed, even after the state that caused it has changed (E6).
func TestBusinessErrorIsRecordedAndReplayed(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{open: b.open})
			_, _, err := e.call("ann", "k1", "alice", "bob", 5000)
			if got := status.Code(err); got != codes.FailedPrecondition {
				t.Fatalf("code = %v (%v), want FailedPrecondition", got, err)
			}
			e.setBalance("alice", 10000)
			_, md, err2 := e.call("ann", "k1", "alice", "bob", 5000)
			if !replayed(md) {
				t.Fatalf("retry of a business error not replayed: %v, metadata %v", err2, md)
			}
			s1, s2 := status.Convert(err).Proto(), status.Convert(err2).Proto()
			if s1.Code != s2.Code || s1.Message != s2.Message || len(s2.Details) != 1 || string(s1.Details[0].Value) != string(s2.Details[0].Value) {
				t.Fatalf("replayed status %v, want %v", s2, s1)
			}
			if got := e.balance("alice"); got != 10000 {
				t.Fatalf("alice = %d, want 10000 (nothing applied)", got)
			}
		})
	}
}

// Unavailable, Internal, DeadlineExceeded, Canceled and Unknown from the
// handler roll the effect back and record nothing: the retry runs again,
// and the effect happens once (E6).
func TestTransientErrorsRollBack(t *testing.T) {
	t.Parallel()
	for _, code := range []codes.Code{codes.Unavailable, codes.Internal, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Aborted, codes.ResourceExhausted} {
		t.Run(code.String(), func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{})
			var mu sync.Mutex
			fail := true
			e.rpc.After = func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				if fail {
					fail = false
					if code == codes.Unknown {
						return errors.New("a plain error") // gRPC sends it as Unknown
					}
					return status.Error(code, "transient")
				}
				return nil
			}
			_, _, err := e.call("ann", "k1", "alice", "bob", 100)
			if got := status.Code(err); got != code {
				t.Fatalf("code = %v, want %v", got, code)
			}
			if got := e.balance("alice"); got != 1000 {
				t.Fatalf("alice = %d after a rolled-back call, want 1000", got)
			}
			_, md, err := e.call("ann", "k1", "alice", "bob", 100)
			if err != nil || replayed(md) {
				t.Fatalf("retry: err %v, replayed %v; want a fresh execution", err, replayed(md))
			}
			if got := e.balance("alice"); got != 900 {
				t.Fatalf("alice = %d, want 900", got)
			}
			want := []idem.Outcome{idem.OutcomeRolledBack, idem.OutcomeExecuted}
			if got := e.events.outcomes(); !slices.Equal(got, want) {
				t.Fatalf("outcomes = %v, want %v", got, want)
			}
		})
	}
}

// A call whose key is held by a running call is refused at once with
// Aborted and a RetryInfo (E3).
func TestInFlightIsAbortedWithRetryInfo(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{open: b.open})
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			e.rpc.Before = func(context.Context) error {
				once.Do(func() { close(entered); <-release })
				return nil
			}
			firstErr := make(chan error, 1)
			go func() {
				_, _, err := e.call("ann", "k1", "alice", "bob", 100)
				firstErr <- err
			}()
			select {
			case <-entered:
			case <-time.After(30 * time.Second):
				t.Fatal("the first call never reached the handler")
			}
			_, _, err := e.call("ann", "k1", "alice", "bob", 100)
			close(release)
			if got := status.Code(err); got != codes.Aborted {
				t.Fatalf("code = %v (%v), want Aborted", got, err)
			}
			if got := idemgrpc.Reason(err); got != idemgrpc.ReasonInFlight {
				t.Fatalf("reason = %q, want %q", got, idemgrpc.ReasonInFlight)
			}
			if d, ok := idemgrpc.RetryDelay(err); !ok || d <= 0 {
				t.Fatalf("RetryInfo = %v, %v; want a positive delay", d, ok)
			}
			if err := <-firstErr; err != nil {
				t.Fatal(err)
			}
			if got := e.balance("alice"); got != 900 {
				t.Fatalf("alice = %d, want 900", got)
			}
		})
	}
}

// The same key with another request is refused with FailedPrecondition
// and reason IDEMPOTENCY_KEY_REUSED; nothing runs or is replayed (E5).
func TestMismatchIsFailedPrecondition(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{open: b.open})
			if _, _, err := e.call("ann", "k1", "alice", "bob", 100); err != nil {
				t.Fatal(err)
			}
			_, md, err := e.call("ann", "k1", "alice", "bob", 200)
			if got := status.Code(err); got != codes.FailedPrecondition || idemgrpc.Reason(err) != idemgrpc.ReasonKeyReused {
				t.Fatalf("got %v reason %q, want FailedPrecondition %s", err, idemgrpc.Reason(err), idemgrpc.ReasonKeyReused)
			}
			if replayed(md) {
				t.Fatal("a mismatch is marked replayed")
			}
			if got := e.balance("alice"); got != 900 {
				t.Fatalf("alice = %d, want 900", got)
			}
			if got := e.events.outcomes()[1]; got != idem.OutcomeMismatch {
				t.Fatalf("outcome = %v, want mismatch", got)
			}
		})
	}
}

// A store that fails answers Unavailable with RetryInfo; nothing runs (E8).
func TestStoreDownIsUnavailable(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	ran := false
	e.rpc.Before = func(context.Context) error { ran = true; return nil }
	e.store.(interface{ Close() error }).Close()
	_, _, err := e.call("ann", "k1", "alice", "bob", 100)
	if got := status.Code(err); got != codes.Unavailable || idemgrpc.Reason(err) != idemgrpc.ReasonUnavailable {
		t.Fatalf("got %v reason %q, want Unavailable %s", err, idemgrpc.Reason(err), idemgrpc.ReasonUnavailable)
	}
	if d, ok := idemgrpc.RetryDelay(err); !ok || d != idemgrpc.DefaultUnavailableRetryAfter {
		t.Fatalf("RetryInfo = %v, %v; want %v", d, ok, idemgrpc.DefaultUnavailableRetryAfter)
	}
	if ran {
		t.Fatal("the handler ran with the store down")
	}
	if got := e.events.outcomes(); !slices.Equal(got, []idem.Outcome{idem.OutcomeUnavailable}) {
		t.Fatalf("outcomes = %v", got)
	}
}

// Keys are validated as HTTP keys are; a bare key and its sf-string form
// name the same key (K3).
func TestKeys(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	_, _, err := e.call("ann", "", "alice", "bob", 100)
	if status.Code(err) != codes.InvalidArgument || idemgrpc.Reason(err) != idemgrpc.ReasonMissingKey {
		t.Fatalf("missing key: %v", err)
	}
	for _, bad := range []string{`"unterminated`, `a b`, `"a", "b"`, `?1`} {
		_, _, err := e.call("ann", bad, "alice", "bob", 100)
		if status.Code(err) != codes.InvalidArgument || idemgrpc.Reason(err) != idemgrpc.ReasonInvalidKey {
			t.Fatalf("key %q: %v, want InvalidArgument %s", bad, err, idemgrpc.ReasonInvalidKey)
		}
	}
	if _, _, err := e.call("ann", "abc", "alice", "bob", 100); err != nil {
		t.Fatal(err)
	}
	_, md, err := e.call("ann", `"abc"`, "alice", "bob", 100)
	if err != nil || !replayed(md) {
		t.Fatalf("sf-string form of the same key: %v, replayed %v", err, replayed(md))
	}
	if got := e.balance("alice"); got != 900 {
		t.Fatalf("alice = %d, want 900", got)
	}
}

// A key sent twice in the metadata is refused.
func TestTwoKeyValuesAreInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	ctx := metadataCtx(t, "authorization", "Bearer ann", idemgrpc.MetadataKey, "a", idemgrpc.MetadataKey, "b")
	_, err := invokeTransfer(ctx, e.conn, transferRequest("alice", "bob", 100))
	if status.Code(err) != codes.InvalidArgument || idemgrpc.Reason(err) != idemgrpc.ReasonInvalidKey {
		t.Fatalf("two values: %v", err)
	}
}

// Without a principal a call is refused, unless the method allows
// anonymous callers; principals never share records (K2).
func TestScopes(t *testing.T) {
	t.Parallel()
	t.Run("NoPrincipalIsRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, options{})
		_, _, err := e.call("", "k1", "alice", "bob", 100)
		if status.Code(err) != codes.Internal || idemgrpc.Reason(err) != idemgrpc.ReasonNoPrincipal {
			t.Fatalf("got %v, want Internal %s", err, idemgrpc.ReasonNoPrincipal)
		}
		if got := e.balance("alice"); got != 1000 {
			t.Fatalf("alice = %d, want 1000", got)
		}
	})
	t.Run("AnonymousMethod", func(t *testing.T) {
		t.Parallel()
		e := setup(t, options{cfg: func(c *idemgrpc.Config) {
			c.Methods[transferMethod] = idemgrpc.MethodOptions{Anonymous: true}
		}})
		if _, _, err := e.call("", "k1", "alice", "bob", 100); err != nil {
			t.Fatal(err)
		}
		if _, md, err := e.call("", "k1", "alice", "bob", 100); err != nil || !replayed(md) {
			t.Fatalf("anonymous retry: %v, replayed %v", err, replayed(md))
		}
	})
	t.Run("PrincipalsAreIndependent", func(t *testing.T) {
		t.Parallel()
		e := setup(t, options{})
		for _, p := range []string{"ann", "ben"} {
			if _, md, err := e.call(p, "k1", "alice", "bob", 100); err != nil || replayed(md) {
				t.Fatalf("%s: %v, replayed %v", p, err, replayed(md))
			}
		}
		if got := e.balance("alice"); got != 800 {
			t.Fatalf("alice = %d, want 800 (one transfer per principal)", got)
		}
	})
}

// An Optional method runs a call without a key unprotected; calls of
// methods not in Config.Methods pass through.
func TestOptionalMethod(t *testing.T) {
	t.Parallel()
	e := setup(t, options{cfg: func(c *idemgrpc.Config) {
		c.Methods[transferMethod] = idemgrpc.MethodOptions{Optional: true}
	}})
	_, _, err := e.call("ann", "", "alice", "bob", 100)
	// Unprotected: the handler runs outside any idem transaction, which
	// the transfers service refuses (it needs one); the point is that the
	// interceptor let it through rather than asking for a key.
	if idemgrpc.Reason(err) != "" {
		t.Fatalf("got an interceptor refusal %v", err)
	}
	if got := e.events.outcomes(); !slices.Equal(got, []idem.Outcome{idem.OutcomeUnprotected}) {
		t.Fatalf("outcomes = %v", got)
	}
}

// Many concurrent calls with one key make one effect; every other answer
// is a replay or Aborted (E2, E3).
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{open: b.open})
			const n = 20
			var wg sync.WaitGroup
			errs := make(chan error, n)
			start := make(chan struct{})
			for range n {
				wg.Go(func() {
					<-start
					_, _, err := e.call("ann", "storm", "alice", "bob", 100)
					errs <- err
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil && status.Code(err) != codes.Aborted {
					t.Fatalf("answer %v, want OK or Aborted", err)
				}
			}
			if got := e.balance("alice"); got != 900 {
				t.Fatalf("alice = %d, want 900 (one effect)", got)
			}
			if got := e.transfers(); got != 1 {
				t.Fatalf("transfers = %d, want 1", got)
			}
		})
	}
}

// The observer receives each call's outcome as an idem.Event with the
// key's hash, the full method and the gRPC code.
func TestObserverEvent(t *testing.T) {
	t.Parallel()
	e := setup(t, options{})
	if _, _, err := e.call("ann", "k1", "alice", "bob", 100); err != nil {
		t.Fatal(err)
	}
	e.call("ann", "k1", "alice", "bob", 999)
	e.events.mu.Lock()
	defer e.events.mu.Unlock()
	if len(e.events.list) != 2 {
		t.Fatalf("%d events, want 2", len(e.events.list))
	}
	got := e.events.list[1]
	want := idem.Event{Transport: idem.TransportGRPC, Outcome: idem.OutcomeMismatch, Route: transferMethod,
		Status: int(codes.FailedPrecondition), KeyHash: idem.KeyHash("k1"), Duration: got.Duration,
		ReplayCache: idem.CacheHit} // the mismatch was answered from the Guard's memory
	if got != want || got.Duration <= 0 {
		t.Fatalf("event = %+v, want %+v", got, want)
	}
}

// A handler that panics rolls back, records nothing, and the panic goes
// on (gRPC does not recover it: a recovery interceptor would sit outside).
func TestPanicRollsBack(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	guard, _ := idem.New(store, nil)
	obs := &events{}
	i, err := idemgrpc.New(guard, &idemgrpc.Config{Methods: map[string]idemgrpc.MethodOptions{"/s.S/M": {}}, Observer: obs, Anonymous: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := incoming(idemgrpc.MetadataKey, "k1")
	info := &grpc.UnaryServerInfo{FullMethod: "/s.S/M"}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not go on")
			}
		}()
		i.Unary(ctx, wrapperspb.String("x"), info, func(ctx context.Context, _ any) (any, error) {
			tx, _ := memstore.TxFrom(ctx)
			tx.Set("effect", "1")
			panic("boom")
		})
	}()
	resp, err := i.Unary(ctx, wrapperspb.String("x"), info, func(ctx context.Context, _ any) (any, error) {
		return wrapperspb.Int64(7), nil
	})
	if err != nil || resp.(*wrapperspb.Int64Value).Value != 7 {
		t.Fatalf("after a panic the retry got %v, %v; want a fresh execution", resp, err)
	}
	if v, ok := store.Value("effect"); ok {
		t.Fatalf("the panicking call's effect was kept: %q", v)
	}
	if got := obs.outcomes(); !slices.Equal(got, []idem.Outcome{idem.OutcomePanic, idem.OutcomeExecuted}) {
		t.Fatalf("outcomes = %v", got)
	}
}
