package pgstore

import (
	"fmt"
	"time"

	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// Config configures a Store. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Schema is the schema that holds the records table and its migration
	// table. Migrate creates it if it does not exist. Defaults to the
	// schema in which the pool's connections create unqualified tables
	// (current_schema(): the first schema of search_path that exists),
	// read once by New, so that the records live beside the tables of the
	// effects they describe. New fails when search_path names no schema
	// that exists.
	Schema string

	// Table is the name of the records table. The migration table is
	// named after it with the suffix "_migrations". Defaults to
	// "idem_records".
	Table string

	// SkipMigrate stops New and Open from applying the migrations; call
	// Migrate yourself (or apply the SQL with your own tool) before the
	// first Begin. Defaults to false: New applies them.
	SkipMigrate bool

	// ReplayProbe makes Begin first look for a live record, and test the
	// key's lock, outside any transaction, in one round trip. A replay or
	// an in-flight refusal then costs one round trip instead of two, and
	// a first execution one more (three instead of two besides the work).
	// Turn it on where retries are a large share of the traffic. Defaults
	// to false.
	ReplayProbe bool

	// IdleInTransactionTimeout is the longest the work's transaction may
	// sit idle between two of its statements (PostgreSQL's
	// idle_in_transaction_session_timeout, set for that transaction
	// only). Past it the server ends the session, which rolls the
	// transaction back and frees the key: the work's next statement fails
	// with a transient error and nothing is recorded.
	//
	// It bounds how long a host that vanished without closing its
	// connections (a power loss, a partition) holds a key between two
	// statements of its work; without it, until TCP keepalive gives up,
	// about two hours by default. Set it above the longest pause the work
	// makes between statements (a downstream call, say). A negative value
	// sets nothing and leaves the server's setting. Defaults to 30
	// seconds.
	IdleInTransactionTimeout time.Duration

	// ProbeConns is the number of connections reserved for answering
	// replays and in-flight refusals when the pool has no idle connection
	// (every one held by a work, say): Begin then looks for a live record
	// and tests the key's lock on one of them, in one round trip, before
	// it waits for a connection of the pool, which only a free key needs.
	// They form a small pool of their own with the pool's configuration,
	// opened at the first such Begin, whose connections close after a
	// minute unused and at Close. A negative value reserves none: every
	// Begin then waits for a connection of the pool. Defaults to 2.
	ProbeConns int
}

// Defaults of Config.
const (
	DefaultTable                    = pgschema.DefaultTable                    // "idem_records"
	DefaultIdleInTransactionTimeout = pgschema.DefaultIdleInTransactionTimeout // 30 seconds
	DefaultProbeConns               = 2
)

// withDefaults returns the configuration with its defaults, checked,
// except Schema, which New resolves against the database when empty.
func (c *Config) withDefaults() (Config, pgschema.Settings, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.ProbeConns == 0 {
		out.ProbeConns = DefaultProbeConns
	}
	set, err := pgschema.Settings{Schema: out.Schema, Table: out.Table, IdleInTransactionTimeout: out.IdleInTransactionTimeout}.WithDefaults("pgstore")
	if err != nil {
		return out, set, err
	}
	out.Table, out.IdleInTransactionTimeout = set.Table, set.IdleInTransactionTimeout
	if out.ProbeConns > maxProbeConns {
		return out, set, fmt.Errorf("pgstore: Config.ProbeConns must be at most %d, got %d", maxProbeConns, out.ProbeConns)
	}
	return out, set, nil
}

// maxProbeConns bounds Config.ProbeConns (pgxpool's MaxConns is an
// int32); a handful is plenty, since each probe is one short statement.
const maxProbeConns = 1 << 10
