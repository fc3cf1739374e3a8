package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

func setup(t *testing.T, s idem.Store) *idem.Guard {
	t.Helper()
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func setEffect(name string) idem.Work {
	return func(ctx context.Context) (idem.Result, error) {
		tx, ok := memstore.TxFrom(ctx)
		if !ok {
			return idem.Result{}, errors.New("no transaction in context")
		}
		tx.Set(name, "done")
		return idem.Result{Status: 201, Body: []byte(name)}, nil
	}
}

func TestGuardRejectsInvalidKeyBeforeTheStore(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g := setup(t, s)
	for _, key := range []string{"", "a b", string(make([]byte, 256))} {
		_, _, err := g.Do(context.Background(), idem.Request{Key: key}, setEffect("invalid"))
		if !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("Do(key %q): err = %v, want ErrInvalidKey", key, err)
		}
	}
	if _, ok := s.Value("invalid"); ok {
		t.Error("the work ran for an invalid key")
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	if _, err := idem.New(nil, nil); err == nil {
		t.Error("New(nil store): want an error")
	}
	if _, err := idem.New(memstore.New(), &idem.Config{TTL: -time.Second}); err == nil {
		t.Error("New with a negative TTL: want an error")
	}
	g := setup(t, memstore.New())
	if _, _, err := g.Do(context.Background(), idem.Request{Key: "k", TTL: -1}, setEffect("x")); err == nil {
		t.Error("Do with a negative Request.TTL: want an error")
	}
	if _, _, err := g.Do(context.Background(), idem.Request{Key: "k"}, nil); err == nil {
		t.Error("Do with nil work: want an error")
	}
}

func TestDefaultTTLIs24Hours(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	g, err := idem.New(s, &idem.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, setEffect("ttl")); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Lookup(context.Background(), &idem.LookupParams{Scope: "s", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.ExpiresAt.Sub(rec.CreatedAt), 24*time.Hour; got != want {
		t.Errorf("record lifetime = %s, want %s", got, want)
	}
}

// failingStore fails the way a store does when its database is down.
type failingStore struct{ beginErr, commitErr error }

var errDown = errors.New("connection refused")

func (f *failingStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if f.beginErr != nil {
		return nil, nil, f.beginErr
	}
	rec, tx, err := memstore.New().Begin(ctx, p)
	if err != nil || rec != nil {
		return rec, tx, err
	}
	return nil, &failingTx{Tx: tx, err: f.commitErr}, nil
}

type failingTx struct {
	idem.Tx
	err error
}

func (f *failingTx) Commit(ctx context.Context, p *idem.CommitParams) error {
	_ = f.Tx.Rollback(ctx)
	return f.err
}

func TestStoreFailuresAreUnavailable(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]*failingStore{
		"Begin":  {beginErr: errDown},
		"Commit": {commitErr: errDown},
	} {
		t.Run(name, func(t *testing.T) {
			g := setup(t, s)
			_, replayed, err := g.Do(context.Background(), idem.Request{Key: "k"}, func(ctx context.Context) (idem.Result, error) {
				return idem.Result{Status: 201}, nil
			})
			if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, errDown) {
				t.Errorf("err = %v, want ErrUnavailable wrapping the store's error", err)
			}
			if replayed {
				t.Error("replayed = true")
			}
		})
	}
}

// conflictStore makes another writer win the key between the work and the
// commit, as a second process would.
type conflictStore struct {
	*memstore.Store
	winner idem.Record
}

func (c *conflictStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	rec, tx, err := c.Store.Begin(ctx, p)
	if err != nil || rec != nil {
		return rec, tx, err
	}
	return nil, &conflictTx{Tx: tx, store: c}, nil
}

type conflictTx struct {
	idem.Tx
	store *conflictStore
}

func (c *conflictTx) Commit(ctx context.Context, p *idem.CommitParams) error {
	_ = c.Tx.Rollback(ctx)
	_, tx, err := c.store.Store.Begin(ctx, &idem.BeginParams{Scope: p.Record.Scope, Key: p.Record.Key, Now: p.Now})
	if err != nil {
		return err
	}
	winner := c.store.winner
	if err := tx.Commit(ctx, &idem.CommitParams{Record: &winner, Now: p.Now}); err != nil {
		return err
	}
	return idem.ErrConflict
}

func TestCommitConflictIsAnsweredFromTheWinner(t *testing.T) {
	t.Parallel()
	now := time.Now()
	winner := func(fp string) idem.Record {
		return idem.Record{Scope: "s", Key: "k", Fingerprint: fp, State: idem.StateCompleted,
			Result: idem.Result{Status: 201, Body: []byte("winner")}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	t.Run("SameRequestReplaysTheWinner", func(t *testing.T) {
		s := &conflictStore{Store: memstore.New(), winner: winner("fp")}
		g := setup(t, s)
		got, replayed, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, setEffect("loser"))
		if err != nil || !replayed || string(got.Body) != "winner" {
			t.Errorf("got body=%q replayed=%v err=%v, want the winner's result replayed", got.Body, replayed, err)
		}
		if _, ok := s.Value("loser"); ok {
			t.Error("the losing call's effect was committed")
		}
	})
	t.Run("OtherRequestIsAMismatch", func(t *testing.T) {
		s := &conflictStore{Store: memstore.New(), winner: winner("other")}
		g := setup(t, s)
		_, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, setEffect("loser"))
		if !errors.Is(err, idem.ErrMismatch) {
			t.Errorf("err = %v, want ErrMismatch", err)
		}
	})
}

func TestInFlightErrorCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g, err := idem.New(s, &idem.Config{InFlightRetryAfter: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = g.Do(context.Background(), idem.Request{Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		_, _, inner := g.Do(ctx, idem.Request{Key: "k"}, setEffect("inner"))
		var ife *idem.InFlightError
		if !errors.As(inner, &ife) || ife.RetryAfter != 3*time.Second || !errors.Is(inner, idem.ErrInFlight) {
			t.Errorf("nested Do on the same key: err = %v, want *InFlightError with RetryAfter 3s", inner)
		}
		return idem.Result{Status: 200}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
