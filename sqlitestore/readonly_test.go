package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

var (
	readOnly    = &sqlitestore.Config{ReadOnly: true}
	skipMigrate = &sqlitestore.Config{SkipMigrate: true}
)

// The tools' opens never create a database: a wrong -db path must be an
// error, not a new empty file.
func TestToolOpensNeverCreateAFile(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]*sqlitestore.Config{"ReadOnly": readOnly, "SkipMigrate": skipMigrate} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "missing.db")
			if s, err := sqlitestore.Open(context.Background(), path, cfg); err == nil {
				s.Close()
				t.Fatal("Open of a missing file: want an error")
			}
			entries, err := os.ReadDir(filepath.Dir(path))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				t.Errorf("Open left %s behind", e.Name())
			}
		})
	}
}

// A read-only store (idem inspect) opens beside the writer, reads records,
// and writes nothing: Begin and DeleteExpired fail with ErrReadOnly, and
// the database refuses writes through DB().
func TestReadOnlyStoreReadsAndNeverWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, path := setup(t)
	now := time.Now()
	g, err := idem.New(w, &idem.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k"}, func(context.Context) (idem.Result, error) {
		return idem.Result{Status: 201, Body: []byte("done")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	r, err := sqlitestore.Open(ctx, path, readOnly)
	if err != nil {
		t.Fatalf("read-only Open beside the writer: %v", err)
	}
	defer r.Close()
	rec, err := r.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"})
	if err != nil || string(rec.Result.Body) != "done" {
		t.Fatalf("Lookup = %+v, %v; want the record", rec, err)
	}
	if _, tx, err := r.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "new", Now: now}); !errors.Is(err, sqlitestore.ErrReadOnly) {
		if tx != nil {
			_ = tx.Rollback(ctx)
		}
		t.Errorf("Begin: err = %v, want ErrReadOnly", err)
	}
	if _, err := r.DeleteExpired(ctx, &idem.DeleteExpiredParams{Now: now.Add(48 * time.Hour), Limit: 10}); !errors.Is(err, sqlitestore.ErrReadOnly) {
		t.Errorf("DeleteExpired: err = %v, want ErrReadOnly", err)
	}
	if _, err := r.DB().ExecContext(ctx, `DELETE FROM idem_records`); err == nil {
		t.Error("DELETE through a read-only store's DB: want an error")
	}
	if _, err := w.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"}); err != nil {
		t.Errorf("the record after the read-only store's attempts: %v", err)
	}
}

// A database closed cleanly has no -wal or -shm file; a read-only open
// still reads it.
func TestReadOnlyOpensAClosedDatabase(t *testing.T) {
	t.Parallel()
	w, path := setup(t)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := sqlitestore.Open(context.Background(), path, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Lookup(context.Background(), &idem.LookupParams{Scope: "s", Key: "k"}); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup: %v, want ErrNotFound", err)
	}
}

// SkipMigrate (idem sweep) writes to a database that holds the schema and
// takes the process lock like any writer.
func TestSkipMigrateWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, path := setup(t)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.Open(ctx, path, skipMigrate)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	past := time.Now().Add(-48 * time.Hour)
	g, err := idem.New(s, &idem.Config{Now: func() time.Time { return past }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k"}, func(context.Context) (idem.Result, error) {
		return idem.Result{Status: 200}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteExpired(ctx, &idem.DeleteExpiredParams{Now: time.Now(), Limit: 10}); err != nil || n != 1 {
		t.Errorf("DeleteExpired = %d, %v; want 1, nil", n, err)
	}
}

// The tools' opens check the schema and change nothing: a file without
// idem's tables, with an older or a newer schema version, or that is not a
// database, fails with ErrSchema and is left as it was.
func TestToolOpensRefuseAnotherSchema(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"EmptyFile", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"NotADatabase", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("this is not a database, just a text file of some length to be read"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"OtherTables", func(t *testing.T, path string) {
			rawExec(t, path, `CREATE TABLE accounts (id INTEGER PRIMARY KEY)`)
		}},
		{"OlderVersion", func(t *testing.T, path string) {
			rawExec(t, path, `CREATE TABLE idem_schema_version (version INTEGER NOT NULL)`,
				`INSERT INTO idem_schema_version VALUES (0)`,
				`CREATE TABLE idem_records (scope TEXT, key TEXT)`)
		}},
		{"NewerVersion", func(t *testing.T, path string) {
			s, err := sqlitestore.Open(context.Background(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			rawExec(t, path, `UPDATE idem_schema_version SET version = `+strconv.Itoa(sqlitestore.SchemaVersion+1))
		}},
	} {
		for name, cfg := range map[string]*sqlitestore.Config{"ReadOnly": readOnly, "SkipMigrate": skipMigrate} {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(t.TempDir(), "x.db")
				tt.make(t, path)
				before, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				s, err := sqlitestore.Open(context.Background(), path, cfg)
				if err == nil {
					s.Close()
				}
				if !errors.Is(err, sqlitestore.ErrSchema) {
					t.Errorf("Open: err = %v, want ErrSchema", err)
				}
				after, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if string(after) != string(before) {
					t.Error("Open changed the file")
				}
			})
		}
	}
}

// rawExec runs statements on the file at path through the driver alone.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}
