package sqldb

import (
	"database/sql"
	"time"

	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// Config configures a Store. The zero value, and a nil *Config, mean
// defaults. Its fields name and drive the table as the pgstore.Config
// fields of the same names do, with the same defaults, so that both stores
// can share one table; docs/POSTGRES.md explains each of them.
type Config struct {
	// Schema holds the records table; Migrate creates it if missing.
	// Defaults to the current_schema() of db's connections, read by New:
	// the first existing schema of their search_path, where the caller's
	// unqualified tables are. New fails if there is none.
	Schema string

	// Table names the records table ("<Table>_migrations" records the
	// migrations). Defaults to "idem_records".
	Table string

	// SkipMigrate leaves the migrations to the caller (Migrate, or the SQL
	// through another tool) before the first Begin. Defaults to false: New
	// applies them.
	SkipMigrate bool

	// ReplayProbe answers replays and in-flight refusals from one
	// statement outside any transaction, before the transaction a new key
	// needs: one round trip instead of four for them, one more for a first
	// execution. Defaults to false.
	ReplayProbe bool

	// IdleInTransactionTimeout bounds each pause of the work's transaction
	// between two statements (idle_in_transaction_session_timeout, for
	// that transaction only), and so how long a host that vanished
	// without a reset holds a key. A work idle for longer loses its
	// session: its next statement fails with a transient error and
	// nothing commits. Keep it above the longest pause of a work (a
	// downstream call, say); a negative value leaves the server's
	// setting. Defaults to 30 seconds.
	IdleInTransactionTimeout time.Duration

	// ProbeDB is a second handle on the same database (a few connections
	// are enough: SetMaxOpenConns(2), say) on which Begin answers replays
	// and in-flight refusals when db has no idle connection and may open
	// no more: it looks for a live record and tests the key's lock there,
	// in one statement, before it waits for a connection of db, which only
	// a free key needs. database/sql can neither open a connection past
	// db's SetMaxOpenConns nor clone its connector, so the store cannot
	// reserve these connections itself. The caller keeps ownership of
	// ProbeDB. Defaults to nil: every Begin waits for a connection of db.
	ProbeDB *sql.DB
}

// Defaults of Config.
const (
	DefaultTable                    = pgschema.DefaultTable                    // "idem_records"
	DefaultIdleInTransactionTimeout = pgschema.DefaultIdleInTransactionTimeout // 30 seconds
)

// withDefaults returns the configuration with its defaults, checked,
// except Schema, which New resolves against the database when empty.
func (c *Config) withDefaults() (Config, pgschema.Settings, error) {
	var out Config
	if c != nil {
		out = *c
	}
	set, err := pgschema.Settings{Schema: out.Schema, Table: out.Table, IdleInTransactionTimeout: out.IdleInTransactionTimeout}.WithDefaults("sqldb")
	out.Table, out.IdleInTransactionTimeout = set.Table, set.IdleInTransactionTimeout
	return out, set, err
}
