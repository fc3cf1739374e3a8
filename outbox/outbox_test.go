package outbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"testing"

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
