package mysqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Config configures a Store. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Database is the database (MySQL's schema) that holds the records
	// table, its steps table and its migration table. Migrate creates it
	// if it does not exist. Defaults to the database the connections use
	// (DATABASE(), the DSN's), read once by New, so that the records live
	// beside the tables of the effects they describe. New fails when the
	// connections use none.
	Database string

	// Table is the name of the records table. The steps table is named
	// after it with the suffix "_steps", the migration table with
	// "_migrations". Defaults to "idem_records".
	Table string

	// SkipMigrate stops New and Open from applying the migrations; call
	// Migrate yourself (or apply the SQL with your own tool) before the
	// first Begin. Defaults to false: New applies them.
	SkipMigrate bool

	// ReplayProbe makes Begin first look for a live record, outside any
	// transaction and without the key's lock: a replay then costs one
	// round trip, and a first execution one more. Turn it on where
	// retries are a large share of the traffic. Defaults to false.
	ReplayProbe bool

	// IdleTimeout is the longest a connection that holds a key (the
	// work's, or a local step's) may stay silent between two statements:
	// the store sets the session's wait_timeout to it when it takes the
	// key. Past it the server closes the session, which rolls the
	// transaction back and releases the key's lock: the work's next
	// statement fails with a transient error and nothing is recorded.
	// The setting stays on the pooled connection once the key is let go:
	// Open's pool closes idle connections before it (SetConnMaxIdleTime
	// at half of it); on a *sql.DB of yours (New), set SetConnMaxIdleTime
	// below it, or the server closes idle connections of the pool, which
	// database/sql replaces when it next takes them.
	//
	// It bounds how long a host that vanished without closing its
	// connections (a power loss, a partition) holds a key; without it,
	// the server's wait_timeout, eight hours by default. Set it above the
	// longest pause the work makes between statements. It is rounded up
	// to whole seconds. A negative value sets nothing. Defaults to 30
	// seconds.
	IdleTimeout time.Duration

	// ProbeDB is a second handle on the same server (a few connections
	// are enough: SetMaxOpenConns(2), say) on which Begin answers replays
	// and in-flight refusals when the store's database has no idle
	// connection and may open no more: it looks for a live record and
	// tests the key's lock there, in one statement, before it waits for a
	// connection, which only a free key needs. Open creates one of
	// ProbeConns connections itself; with New the caller passes it and
	// keeps ownership. Defaults to nil: with New, every Begin waits for
	// a connection.
	ProbeDB *sql.DB

	// ProbeConns is the size of the ProbeDB that Open creates when
	// ProbeDB is nil. A negative value creates none. Defaults to 2.
	// New ignores it.
	ProbeConns int
}

// Defaults of Config.
const (
	DefaultTable       = "idem_records"
	DefaultIdleTimeout = 30 * time.Second
	DefaultProbeConns  = 2
)

// maxNameLen is MySQL's longest identifier (64 characters); the table's
// longest derived name adds "_migrations".
const maxNameLen = 64

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if out.IdleTimeout == 0 {
		out.IdleTimeout = DefaultIdleTimeout
	}
	if out.ProbeConns == 0 {
		out.ProbeConns = DefaultProbeConns
	}
	if err := checkName("Table", out.Table, len("_migrations")); err != nil {
		return out, err
	}
	if out.Database != "" {
		if err := checkName("Database", out.Database, 0); err != nil {
			return out, err
		}
	}
	if out.IdleTimeout > 0 && out.IdleTimeout > 365*24*time.Hour {
		return out, fmt.Errorf("mysqlstore: Config.IdleTimeout must be at most a year, got %s", out.IdleTimeout)
	}
	return out, nil
}

// checkName refuses a name MySQL cannot hold once suffix more characters
// are appended to it.
func checkName(field, name string, suffix int) error {
	switch {
	case !utf8.ValidString(name):
		return fmt.Errorf("mysqlstore: Config.%s must be valid UTF-8", field)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("mysqlstore: Config.%s must not contain NUL", field)
	case strings.HasSuffix(name, " "):
		return fmt.Errorf("mysqlstore: Config.%s must not end with a space", field)
	case utf8.RuneCountInString(name)+suffix > maxNameLen:
		return fmt.Errorf("mysqlstore: Config.%s %q is too long: MySQL names are at most %d characters, and the store appends up to %d", field, name, maxNameLen, suffix)
	}
	return nil
}

// idleSeconds is IdleTimeout as wait_timeout, rounded up; 0 sets nothing.
func (c *Config) idleSeconds() int64 {
	if c.IdleTimeout <= 0 {
		return 0
	}
	return int64((c.IdleTimeout + time.Second - 1) / time.Second)
}

var errNoDatabase = errors.New("mysqlstore: the connections use no database (DATABASE() is NULL): name one in the DSN or in Config.Database")
