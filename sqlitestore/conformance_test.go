package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/idemkit/idem/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewLocation: func(t testing.TB) string { return filepath.Join(t.TempDir(), "idem.db") },
		Open:        openWithEffects,
		Close:       func(s idem.Store) error { return s.(*sqlitestore.Store).Close() },
		Persistent:  true,
		Effect: func(ctx context.Context, name string) error {
			return execTx(ctx, `INSERT INTO effects (name) VALUES (?)`, name)
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			var n int
			err := s.(*sqlitestore.Store).DB().QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE name = ?`, name).Scan(&n)
			return n, err
		},
		// An open Tx holds SQLite's write lock, so no other connection can
		// write until it ends: the record goes in through the Tx, as if
		// another process had committed it just before BEGIN IMMEDIATE.
		PlantRecord: func(ctx context.Context, _ idem.Store, rec *idem.Record) (bool, error) {
			return true, execTx(ctx, `INSERT OR REPLACE INTO idem_records
				(scope, key, fingerprint, state, status, body, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				rec.Scope, rec.Key, rec.Fingerprint, string(rec.State), rec.Result.Status, append([]byte{}, rec.Result.Body...),
				rec.CreatedAt.UnixNano(), rec.ExpiresAt.UnixNano())
		},
		EndTx: func(ctx context.Context, end storetest.TxEnd) error {
			return execTx(ctx, string(end))
		},
		FailCommit: func(ctx context.Context) error {
			return execTx(ctx, `INSERT INTO doomed (parent) VALUES (1)`)
		},
	})
}

// openWithEffects opens the store at path with the tables the harness
// writes to: effects, and doomed, whose deferred foreign key fails any
// COMMIT of a transaction that inserted into it.
func openWithEffects(ctx context.Context, path string) (idem.Store, error) {
	s, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS effects (name TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS doomed_parent (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE IF NOT EXISTS doomed (parent INTEGER REFERENCES doomed_parent (id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := s.DB().ExecContext(ctx, stmt); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// execTx runs a statement through the transaction that ctx carries.
func execTx(ctx context.Context, query string, args ...any) error {
	tx, ok := sqlitestore.TxFrom(ctx)
	if !ok {
		return errors.New("no sqlitestore transaction in the context")
	}
	_, err := tx.ExecContext(ctx, query, args...)
	return err
}
