package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Open opens the SQLite database at path and returns the store. A nil cfg
// means defaults.
//
// By default it creates the file when it is missing (mode 0600) and creates
// or migrates the schema. Config.ReadOnly and Config.SkipMigrate open an
// existing file as it is. A writing store takes the process lock on the
// file, so Open fails with ErrLocked while another process has the file
// open for writing.
func Open(ctx context.Context, path string, cfg *Config) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlitestore: Open: bad database path %q", path)
	}
	resolved, err := resolve(path, !c.ReadOnly && !c.SkipMigrate)
	if err != nil {
		return nil, err
	}
	s := &Store{path: resolved, cfg: c}
	if !c.ReadOnly {
		if s.file, err = acquireFile(resolved); err != nil {
			return nil, err
		}
		// Every Store of the file in this process uses the same name, so
		// that SQLite finds one WAL even when a hard link was opened.
		s.path = s.file.path
	}
	s.db, err = sql.Open("sqlite", dsn(s.path, c))
	if err != nil {
		if s.file != nil {
			s.file.release()
		}
		return nil, fmt.Errorf("sqlitestore: Open: %w", err)
	}
	s.db.SetMaxOpenConns(c.MaxOpenConns)
	s.db.SetMaxIdleConns(c.MaxOpenConns)
	if c.ReadOnly || c.SkipMigrate {
		err = s.checkSchema(ctx)
	} else {
		err = s.migrate(ctx)
	}
	if err == nil {
		err = s.prepare(ctx)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// resolve returns the absolute path of the database file with symlinks
// resolved, creating an empty file (which SQLite takes for an empty
// database) when create is set and none exists.
func resolve(path string, create bool) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlitestore: Open: %w", err)
	}
	info, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return "", fmt.Errorf("sqlitestore: Open: %w", err)
		}
		if err := f.Close(); err != nil {
			return "", fmt.Errorf("sqlitestore: Open: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("sqlitestore: Open: no database at %s (a read-only or non-migrating open never creates one): %w", abs, err)
	case err != nil:
		return "", fmt.Errorf("sqlitestore: Open: %w", err)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("sqlitestore: Open: %s is not a regular file", abs)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("sqlitestore: Open: %w", err)
	}
	return resolved, nil
}

// dsn is the driver's data source name for the file at path. It is a URI
// filename (SQLite reads mode=ro from it); the driver runs the _pragma
// values on every new connection.
func dsn(path string, c Config) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", c.BusyTimeout.Milliseconds()))
	if c.ReadOnly {
		q.Set("mode", "ro")
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("mode", "rw") // the file exists; never let SQLite create another
		if !c.SkipMigrate {
			// Persistent: a database this package created is in WAL
			// mode already, and a non-migrating open changes nothing
			// before it has checked the schema.
			q.Add("_pragma", "journal_mode(WAL)")
		}
		q.Add("_pragma", "synchronous("+c.Synchronous+")")
		q.Set("_txlock", "immediate")
	}
	q.Add("_pragma", "foreign_keys(1)")
	// In a URI filename '%' starts an escape; '?' and '#' are refused.
	return "file:" + strings.ReplaceAll(path, "%", "%25") + "?" + q.Encode()
}
