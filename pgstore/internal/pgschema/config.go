package pgschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults that pgstore.Config and sqldb.Config share: both stores drive
// the same table the same way, so their defaults are one.
const (
	DefaultTable                    = "idem_records"
	DefaultIdleInTransactionTimeout = 30 * time.Second
)

// Settings are the fields of a store's Config that shape its table and
// its SQL, as both stores have them.
type Settings struct {
	Schema                   string // "" until CurrentSchema resolves it
	Table                    string
	IdleInTransactionTimeout time.Duration // negative: leave the server's
}

// WithDefaults fills the zero fields but Schema, which only the database
// can resolve (see CurrentSchema), and checks the result. pkg prefixes the
// errors ("pgstore", "sqldb").
func (s Settings) WithDefaults(pkg string) (Settings, error) {
	if s.Table == "" {
		s.Table = DefaultTable
	}
	if s.IdleInTransactionTimeout == 0 {
		s.IdleInTransactionTimeout = DefaultIdleInTransactionTimeout
	}
	return s, s.Check(pkg)
}

// maxTableLen keeps the names derived from the table ("…_migrations",
// "…_expires_at_idx", the longest, and leased mode's "…_steps",
// "…_steps_pkey", "…_pending_idx" and "…_steps_seq_seq", the sequence
// PostgreSQL names for the steps' identity column) within PostgreSQL's
// 63-byte identifier limit, which it would otherwise truncate silently.
const maxTableLen = 63 - len("_expires_at_idx")

// maxIdle is the largest idle_in_transaction_session_timeout PostgreSQL
// takes: an int of milliseconds.
const maxIdle = math.MaxInt32 * time.Millisecond

// Check rejects what PostgreSQL cannot hold, naming the Config field at
// fault. Any character but NUL is fine in a name: identifiers are always
// quoted.
func (s Settings) Check(pkg string) error {
	if err := checkIdent(pkg, "Schema", s.Schema, 63); err != nil {
		return err
	}
	if err := checkIdent(pkg, "Table", s.Table, maxTableLen); err != nil {
		return err
	}
	if s.IdleInTransactionTimeout > maxIdle {
		return fmt.Errorf("%s: Config.IdleInTransactionTimeout must be at most %s, got %s", pkg, maxIdle, s.IdleInTransactionTimeout)
	}
	return nil
}

func checkIdent(pkg, field, name string, max int) error {
	switch {
	case len(name) > max:
		return fmt.Errorf("%s: Config.%s must be at most %d bytes, got %d", pkg, field, max, len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("%s: Config.%s must be valid UTF-8", pkg, field)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%s: Config.%s must not contain a NUL byte", pkg, field)
	}
	return nil
}

// ErrNoSchema is wrapped by CurrentSchema's error when the connection's
// search_path names no schema that exists.
var ErrNoSchema = errors.New("search_path names no schema that exists")

// CurrentSchema returns the schema that q's connection creates unqualified
// tables in: current_schema(), the first schema of search_path that exists
// (and that the role may use). It is where the records belong when
// Config.Schema is empty, beside the caller's own tables. A search_path
// that names no existing schema is an error that says which path it was
// and wraps ErrNoSchema; a failure to ask is returned as it is.
func CurrentSchema(ctx context.Context, q Querier, pkg string) (string, error) {
	var (
		schema sql.NullString
		path   string
	)
	if err := q.QueryRow(ctx, `SELECT current_schema(), current_setting('search_path')`).Scan(&schema, &path); err != nil {
		return "", err
	}
	if !schema.Valid {
		return "", fmt.Errorf("%s: Config.Schema is empty and the connection's search_path (%s) %w: create the schema, or set Config.Schema", pkg, path, ErrNoSchema)
	}
	return schema.String, nil
}

// Resolve sets s.Schema, when empty, to the CurrentSchema of q's
// connection. A search_path without a schema is a configuration error,
// returned as it is; a failure to ask is wrapped by Unavailable.
func (s *Settings) Resolve(ctx context.Context, q Querier, pkg string) error {
	if s.Schema != "" {
		return nil
	}
	schema, err := CurrentSchema(ctx, q, pkg)
	switch {
	case errors.Is(err, ErrNoSchema):
		return err
	case err != nil:
		return Unavailable(pkg, "current_schema()", err)
	}
	s.Schema = schema
	return nil
}
