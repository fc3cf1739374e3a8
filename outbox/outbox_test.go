package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/sqlitestore"
)

func TestIDIsStableAndUnambiguous(t *testing.T) {
	a := outbox.ID("s", "k", "n")
	if a != outbox.ID("s", "k", "n") {
		t.Fatal("ID is not deterministic")
	}
	if !regexp.MustCompile(`^msg_[a-z2-7]{32}$`).MatchString(a) {
		t.Errorf("ID = %q, want msg_ and 32 lowercase base32 characters", a)
	}
	seen := map[string][3]string{}
	for _, in := range [][3]string{{"s", "k", "n"}, {"sk", "", "n"}, {"s", "kn", ""}, {"", "sk", "n"}, {"s", "k", "m"}, {"t", "k", "n"}} {
		id := outbox.ID(in[0], in[1], in[2])
		if prev, dup := seen[id]; dup {
			t.Errorf("ID%q = ID%q", in, prev)
		}
		seen[id] = in
	}
}

// wrapped stands for a tracing wrapper of a store's transaction.
type wrapped struct{ idem.Tx }

func (w wrapped) Unwrap() idem.Tx { return w.Tx }

func TestStageChecksAndFindsWrappedTransactions(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	wctx := idem.WithTx(ctx, wrapped{tx})
	for _, tt := range []struct {
		name string
		msgs []outbox.Message
	}{
		{"empty name", []outbox.Message{{}}},
		{"control character in the name", []outbox.Message{{Name: "a\nb"}}},
		{"two messages of one name", []outbox.Message{{Name: "a"}, {Name: "a"}}},
		{"empty header name", []outbox.Message{{Name: "a", Headers: map[string]string{"": "x"}}}},
		{"NUL in a header value", []outbox.Message{{Name: "a", Headers: map[string]string{"h": "x\x00"}}}},
	} {
		if err := outbox.Stage(wctx, tt.msgs...); err == nil {
			t.Errorf("%s: Stage accepted %+v", tt.name, tt.msgs)
		}
	}
	if err := outbox.Stage(wctx, outbox.Message{Name: "ok"}); err != nil {
		t.Fatalf("Stage through a wrapped transaction: %v", err)
	}
	if err := outbox.Stage(ctx, outbox.Message{Name: "ok"}); !errors.Is(err, outbox.ErrNoTx) {
		t.Errorf("Stage without a transaction = %v, want ErrNoTx", err)
	}
	if err := outbox.Stage(idem.WithTx(ctx, foreignTx{}), outbox.Message{Name: "ok"}); err == nil || errors.Is(err, outbox.ErrNoTx) {
		t.Errorf("Stage in a store without an outbox = %v, want an error naming it", err)
	}
}

type foreignTx struct{}

func (foreignTx) Handle() any                                      { return nil }
func (foreignTx) Commit(context.Context, *idem.CommitParams) error { return nil }
func (foreignTx) Rollback(context.Context) error                   { return nil }

func TestRelayConfigRefusesNegatives(t *testing.T) {
	r := outbox.NewRelay(nil, nil, &outbox.RelayConfig{BatchSize: -1})
	if err := r.Run(context.Background()); err == nil {
		t.Error("Run with a negative BatchSize and no Source returned nil")
	}
	if _, err := outbox.NewRelay(nil, nil, nil).RunOnce(context.Background()); err == nil {
		t.Error("RunOnce without a Source returned nil")
	}
}

// refuseAll refuses every publish and counts them.
type refuseAll struct{ n atomic.Int64 }

func (p *refuseAll) Publish(context.Context, outbox.Envelope) error {
	p.n.Add(1)
	return fmt.Errorf("%w: no queue is bound", outbox.ErrRefused)
}

// A broker that refuses every message is most likely misconfigured: the
// relay backs off between such claims rather than spending a message's
// attempts at its poll rate (every 1 ms here) and parking it within
// milliseconds.
func TestRelayBacksOffWhenEveryMessageIsRefused(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		return idem.Result{Status: 200}, outbox.Stage(ctx, outbox.Message{Name: "m"})
	}); err != nil {
		t.Fatal(err)
	}
	pub := new(refuseAll)
	r := outbox.NewRelay(s.Outbox(), pub, &outbox.RelayConfig{PollInterval: time.Millisecond, MaxAttempts: 10, MaxBackoff: time.Second})
	rctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	if err := r.Run(rctx); err != nil {
		t.Fatal(err)
	}
	// 50, 100 and 200 ms of backoff fit in 400 ms: at most 4 attempts.
	if n := pub.n.Load(); n > 4 {
		t.Errorf("%d publishes in 400 ms, want at most 4 (a backoff from 50 ms)", n)
	}
	b, err := s.Outbox().Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Parked != 0 || b.Pending != 1 {
		t.Errorf("backlog %+v, want the message pending, not parked", b)
	}
}
