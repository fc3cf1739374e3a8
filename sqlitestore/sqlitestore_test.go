package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

func setup(t *testing.T) (*sqlitestore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestStoresOnOneFileShareTheInFlightLock(t *testing.T) {
	// E3: two Store values on one file in one process refuse each other's
	// keys at once instead of waiting for the write lock.
	t.Parallel()
	a, path := setup(t)
	b, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	p := &idem.BeginParams{Scope: "s", Key: "k", Now: time.Now()}
	_, tx, err := a.Begin(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, tx2, err := b.Begin(ctx, p); !errors.Is(err, idem.ErrInFlight) {
		if tx2 != nil {
			tx2.Rollback(ctx)
		}
		t.Fatalf("Begin on the second store: err = %v, want ErrInFlight", err)
	}
}

func TestWriterWaitIsBounded(t *testing.T) {
	// E8: a write that cannot get the database within BusyTimeout fails
	// with ErrUnavailable instead of waiting forever.
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	s, err := sqlitestore.Open(context.Background(), path, &sqlitestore.Config{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "holder", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_, tx2, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "other", Now: time.Now()})
		if tx2 != nil {
			tx2.Rollback(ctx)
		}
		if !errors.Is(err, idem.ErrUnavailable) {
			t.Errorf("Begin while another key holds the writer: err = %v, want ErrUnavailable", err)
		}
	})
	wg.Wait()
}

func TestOpenValidatesConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, cfg := range []*sqlitestore.Config{{Synchronous: "OFF"}, {BusyTimeout: -1}, {MaxOpenConns: -1}} {
		if s, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "x.db"), cfg); err == nil {
			s.Close()
			t.Errorf("Open(%+v): want an error", *cfg)
		}
	}
	if _, err := sqlitestore.Open(context.Background(), "", nil); err == nil {
		t.Error(`Open(""): want an error`)
	}
}

func TestReopenDoesNotMigrateTwice(t *testing.T) {
	t.Parallel()
	s, path := setup(t)
	s.Close()
	for range 2 {
		s2, err := sqlitestore.Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v int
		if err := s2.DB().QueryRow(`SELECT version FROM idem_schema_version`).Scan(&v); err != nil || v != sqlitestore.SchemaVersion {
			t.Errorf("schema version = %d, %v; want %d", v, err, sqlitestore.SchemaVersion)
		}
		s2.Close()
	}
}
