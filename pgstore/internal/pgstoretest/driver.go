// Package pgstoretest is the test body that pgstore and pgstore/sqldb share:
// each behaviour of a PostgreSQL store is written once here and run against
// both, through a small Driver that each store's tests implement (the way
// pgx runs one test body in every query mode). Only tests import it.
//
// Run runs the tests; the Benchmark functions are the benchmarks.
package pgstoretest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// execIn runs a statement in a transaction that d.Tx finds.
func execIn(ctx context.Context, d Driver, tx idem.Tx, sql string, args ...any) error {
	q, err := d.Tx(ctx, tx)
	if err != nil {
		return err
	}
	return q.Exec(ctx, sql, args...)
}

// queryRow runs a query in a transaction that d.Tx finds.
func queryRow(ctx context.Context, d Driver, tx idem.Tx, sql string, args ...any) pgschema.Row {
	q, err := d.Tx(ctx, tx)
	if err != nil {
		return errRow{err}
	}
	return q.QueryRow(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Driver opens one of the two stores and reaches into its transactions.
type Driver interface {
	// Open opens a store with cfg on new connections shaped by c. Both
	// are closed at t's clean-up, or by Env.Close.
	Open(ctx context.Context, t testing.TB, c Conn, cfg Config) (*Env, error)

	// Tx returns what runs statements in tx's transaction, or, when tx is
	// nil, in the transaction of the work that ctx was given to (found
	// through the package's TxFrom).
	Tx(ctx context.Context, tx idem.Tx) (pgschema.Querier, error)

	// Transient is the package's Transient.
	Transient(err error) bool

	// SetLockKey replaces the lock-key hash of a store that Open returned.
	SetLockKey(s Store, f func(scope, key string) int64)

	// RoundTrips are the round trips docs/POSTGRES.md promises, besides the
	// work's own statements.
	RoundTrips(replayProbe bool) RoundTrips
}

// RoundTrips counts the round trips of each path.
type RoundTrips struct {
	First, Replay, InFlight int64
}

// Conn shapes the connections a store gets.
type Conn struct {
	DSN        string // the server; pgtest.DSN() when empty
	Nil        bool   // give New a nil pool or *sql.DB
	SearchPath string // search_path, as PostgreSQL reads it; the server's when empty
	AppName    string // application_name, if not empty
	MaxConns   int    // the most connections; 8 when 0
	Runtime    map[string]string
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	NoPing     bool // never ping a connection before handing it out
}

// Config is the configuration both stores take; each driver copies it
// into its package's Config.
type Config struct {
	Schema, Table            string
	SkipMigrate, ReplayProbe bool
	IdleInTransactionTimeout time.Duration
	// ProbeConns reserves connections for probes: pgstore's
	// Config.ProbeConns, or for sqldb, when positive, a Config.ProbeDB of
	// that many connections (none otherwise).
	ProbeConns int
}

// Store is what both stores implement.
type Store interface {
	idem.Store
	idem.Inspector
	idem.ExpiredDeleter
}

// Env is an open store and its connections.
type Env struct {
	Store Store

	// DB runs statements on the store's connections, outside any work.
	DB pgschema.Querier

	// InTx runs f in a plain transaction of the store's connections (not
	// idem's), committed when f returns nil: the baseline of benchmarks.
	InTx func(ctx context.Context, f func(tx pgschema.Querier) error) error

	// Hold takes a connection out of the store's pool until release.
	Hold func(ctx context.Context) (release func(), err error)

	// Close closes the store and its connections.
	Close func()
}
