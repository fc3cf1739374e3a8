package sqlitestore_test

import (
	"context"
	"database/sql"
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

func TestCommitNeverOverwritesALiveRecord(t *testing.T) {
	// E2: the primary key, not the lock, is the final arbiter. A row that
	// appears under the transaction (as from another process) makes Commit
	// fail with ErrConflict when it is live; an expired one is replaced.
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		expiresAt time.Time
		wantErr   error
	}{
		{"Live", now.Add(time.Nanosecond), idem.ErrConflict},
		{"Expired", now, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := "k-" + tt.name
			_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: key, Now: now})
			if err != nil || tx == nil {
				t.Fatalf("Begin: tx=%v err=%v", tx, err)
			}
			if _, err := tx.Handle().(*sql.Tx).ExecContext(ctx,
				`INSERT INTO idem_records (scope, key, fingerprint, state, status, body, created_at, expires_at)
				 VALUES ('s', ?, 'theirs', 'completed', 200, x'', 0, ?)`, key, tt.expiresAt.UnixNano()); err != nil {
				t.Fatal(err)
			}
			ours := &idem.Record{Scope: "s", Key: key, Fingerprint: "ours", State: idem.StateCompleted, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			err = tx.Commit(ctx, &idem.CommitParams{Record: ours, Now: now})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Commit: err = %v, want %v", err, tt.wantErr)
			}
			rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: key})
			if tt.wantErr != nil {
				if !errors.Is(err, idem.ErrNotFound) {
					t.Errorf("after a conflict: Lookup = %+v, %v; want the transaction rolled back", rec, err)
				}
				return
			}
			if err != nil || rec.Fingerprint != "ours" {
				t.Errorf("Lookup = %+v, %v; want our record replacing the expired one", rec, err)
			}
		})
	}
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
