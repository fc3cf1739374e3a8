package sqlitestore

import (
	"fmt"
	"strings"
	"time"
)

// Config configures a Store. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Synchronous is SQLite's synchronous level: "FULL" or "NORMAL" (see
	// the package documentation for what each risks). Defaults to "FULL".
	Synchronous string

	// BusyTimeout is how long a write waits for the database's write lock
	// (held by another write of this process, by a COMMIT still going on
	// past its caller's deadline, or by another program writing the file)
	// before the call fails with idem.ErrUnavailable. Defaults to 5
	// seconds.
	BusyTimeout time.Duration

	// MaxOpenConns bounds the connection pool. Defaults to 8.
	MaxOpenConns int

	// ReadOnly opens an existing database for reading, for tools such as
	// idem inspect: no migration, no process lock (so it opens while the
	// writing process runs), Lookup works, and Begin and DeleteExpired
	// fail with ErrReadOnly. Open fails when the file is missing (it never
	// creates one) and with ErrSchema when the file does not hold
	// SchemaVersion. Defaults to false.
	ReadOnly bool

	// SkipMigrate opens an existing database for writing without creating
	// or migrating the schema, for tools such as idem sweep. It takes the
	// process lock like any writer. Open fails when the file is missing
	// (it never creates one) and with ErrSchema when the file does not hold
	// SchemaVersion. ReadOnly implies it. Defaults to false.
	SkipMigrate bool
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	switch strings.ToUpper(out.Synchronous) {
	case "":
		out.Synchronous = "FULL"
	case "FULL", "NORMAL":
		out.Synchronous = strings.ToUpper(out.Synchronous)
	default:
		return out, fmt.Errorf("sqlitestore: Config.Synchronous must be FULL or NORMAL, got %q", out.Synchronous)
	}
	if out.BusyTimeout < 0 {
		return out, fmt.Errorf("sqlitestore: Config.BusyTimeout must not be negative, got %s", out.BusyTimeout)
	}
	if out.BusyTimeout == 0 {
		out.BusyTimeout = 5 * time.Second
	}
	if out.MaxOpenConns < 0 {
		return out, fmt.Errorf("sqlitestore: Config.MaxOpenConns must not be negative, got %d", out.MaxOpenConns)
	}
	if out.MaxOpenConns == 0 {
		out.MaxOpenConns = 8
	}
	return out, nil
}
