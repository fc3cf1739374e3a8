package mysqlstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// names are the quoted identifiers of one store's tables.
type names struct {
	database   string // `d`
	table      string // `d`.`t`
	steps      string // `d`.`t_steps`
	migrations string // `d`.`t_migrations`
	outbox     string // `d`.`t_outbox` (migration 2, outbox.go)
	audit      string // `d`.`t_audit` (migration 3, admin.go)
	beginProc  string // `d`.`t_begin` (procedure.go)
	commitProc string // `d`.`t_commit` (procedure.go)
	bare       string // d.t, unquoted, for lock names and errors
}

func newNames(database, table string) names {
	return names{
		database:   quote(database),
		table:      quote(database) + "." + quote(table),
		steps:      quote(database) + "." + quote(table+"_steps"),
		migrations: quote(database) + "." + quote(table+"_migrations"),
		outbox:     quote(database) + "." + quote(table+"_outbox"),
		audit:      quote(database) + "." + quote(table+"_audit"),
		beginProc:  quote(database) + "." + quote(table+beginSuffix),
		commitProc: quote(database) + "." + quote(table+commitSuffix),
		bare:       database + "." + table,
	}
}

// quote returns name as a quoted MySQL identifier: in backticks, each
// backtick doubled.
func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// The store sends every statement as text, each value written as a
// literal: byte strings in hexadecimal (X'…'), integers in decimal. A
// statement is then one round trip whatever the DSN says (go-sql-driver
// prepares a statement with parameters on the server, a round trip more,
// unless interpolateParams is set), and no value is ever parsed as SQL,
// whatever its bytes, the connection's character set or its sql_mode.

// hexLit is b (a string or bytes) as a binary string literal.
func hexLit[T ~string | ~[]byte](b T) string {
	out := make([]byte, 0, 3+2*len(b))
	out = append(out, "X'"...)
	out = hex.AppendEncode(out, []byte(b))
	return string(append(out, '\''))
}

// nullLit is b as a literal, NULL when b is nil.
func nullLit(b []byte) string {
	if b == nil {
		return "NULL"
	}
	return hexLit(b)
}

func intLit(n int64) string { return strconv.FormatInt(n, 10) }

// micros is t as the stored form of a time: microseconds since the epoch,
// in UTC, as PostgreSQL keeps them.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// lockName is the name of the user-level lock (GET_LOCK) of (scope, key)
// on the table n names: "idem:" and 40 hex digits of the SHA-256 of the
// three, each prefixed by its length so that no two triples share an
// input. MySQL's lock names are at most 64 characters; a collision costs a
// spurious ErrInFlight, never a wrong answer, since what a request is
// answered is decided by the stored (scope, key).
func lockName(n names, scope, key string) string {
	h := sha256.New()
	for _, s := range []string{n.bare, scope, key} {
		var l [8]byte
		binary.BigEndian.PutUint64(l[:], uint64(len(s)))
		h.Write(l[:])
		h.Write([]byte(s))
	}
	return "idem:" + hex.EncodeToString(h.Sum(nil)[:20])
}

// migrationLock is the lock name under which Migrate runs, one per table.
func migrationLock(n names) string {
	sum := sha256.Sum256([]byte(n.bare))
	return "idem-migrate:" + hex.EncodeToString(sum[:16])
}

// recordColumns are the columns of a record, in the order scanRecord reads
// them.
const recordColumns = "fingerprint, state, status, headers, body, created_at, expires_at, token, lease_until, kind, input, attempts, last_error, ttl_us"

// keyIs is the condition on the record of (scope, key).
func keyIs(scope, key string) string {
	return "scope = " + hexLit(scope) + " AND `key` = " + hexLit(key)
}

// migration is one versioned schema change: statements run in order (DDL
// commits on its own in MySQL, so each must be safe to run again after a
// crash in the middle: IF NOT EXISTS).
type migration struct {
	version int
	sql     func(n names) []string
}

// migrations are applied in order, each at most once per table. Append;
// never edit a released one.
var migrations = []migration{
	{version: 1, sql: func(n names) []string {
		return []string{
			// Every value the store keeps is bytes (VARBINARY, BLOB):
			// scopes, keys, fingerprints, headers and bodies compare and
			// come back byte for byte, whatever the connection's
			// character set. Times are microseconds since the epoch.
			`CREATE TABLE IF NOT EXISTS ` + n.table + ` (
	scope       VARBINARY(255) NOT NULL,
	` + "`key`" + `       VARBINARY(255) NOT NULL,
	fingerprint BLOB           NOT NULL,
	state       VARBINARY(16)  NOT NULL,
	status      INT            NOT NULL,
	headers     BLOB           NULL,
	body        LONGBLOB       NOT NULL,
	created_at  BIGINT         NOT NULL,
	expires_at  BIGINT         NOT NULL,
	token       BIGINT         NOT NULL DEFAULT 0,
	lease_until BIGINT         NULL,
	kind        VARBINARY(255) NOT NULL DEFAULT '',
	input       LONGBLOB       NULL,
	attempts    INT            NOT NULL DEFAULT 0,
	last_error  BLOB           NULL,
	ttl_us      BIGINT         NOT NULL DEFAULT 0,
	PRIMARY KEY (scope, ` + "`key`" + `),
	KEY expires_at_idx (expires_at),
	KEY pending_idx (state, lease_until)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`,
			`CREATE TABLE IF NOT EXISTS ` + n.steps + ` (
	scope      VARBINARY(255) NOT NULL,
	` + "`key`" + `      VARBINARY(255) NOT NULL,
	name       VARBINARY(255) NOT NULL,
	seq        BIGINT         NOT NULL AUTO_INCREMENT,
	output     LONGBLOB       NULL,
	created_at BIGINT         NOT NULL,
	PRIMARY KEY (scope, ` + "`key`" + `, name),
	UNIQUE KEY seq_idx (seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`,
		}
	}},
	// 2: the outbox (outbox.go).
	{version: 2, sql: outboxMigration},
	// 3: the audit log of idem.Admin (admin.go).
	{version: 3, sql: auditMigration},
}
