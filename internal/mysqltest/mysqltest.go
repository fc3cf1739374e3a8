// Package mysqltest is the MySQL and MariaDB plumbing the module's tests
// share: which server they use, what happens when it is missing, and
// throwaway databases.
//
// The server is the one at IDEM_MYSQL_DSN (a go-sql-driver/mysql DSN), or
// [DefaultDSN]. When it cannot be reached, tests that need it are skipped,
// except under CI=true, where a missing server fails them.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem/internal/servertest"
)

// DefaultDSN is the server the tests use when IDEM_MYSQL_DSN is not set.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

var server = &servertest.Server{
	Name: "MySQL", Env: "IDEM_MYSQL_DSN", Default: DefaultDSN, Hint: "start the server (MariaDB or MySQL)",
	Ping: func(ctx context.Context, dsn string) error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	},
}

// DSN returns IDEM_MYSQL_DSN, or DefaultDSN when it is not set.
func DSN() string { return server.Addr() }

// Require returns DSN() when the server answers. When it does not, Require
// skips the test, or fails it under CI=true.
func Require(t testing.TB) string {
	t.Helper()
	return server.Require(t)
}

// Database calls Require, creates a fresh database, dropped with
// everything in it at clean-up, and returns its name and a DSN whose
// connections use it. Clean-ups registered later run first, so a store
// opened on the DSN and closed at clean-up is gone before the drop.
func Database(t testing.TB) (name, dsn string) {
	t.Helper()
	base := Require(t)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("IDEM_MYSQL_DSN: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "idem_test_" + hex.EncodeToString(b[:])
	exec(t, base, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4")
	t.Cleanup(func() { exec(t, base, "DROP DATABASE IF EXISTS `"+name+"`") })
	cfg.DBName = name
	return name, cfg.FormatDSN()
}

// WithAddr returns dsn with its network address replaced by addr
// (host:port), for a client that must go through a proxy.
func WithAddr(t testing.TB, dsn, addr string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Net, cfg.Addr = "tcp", addr
	return cfg.FormatDSN()
}

// URL returns dsn in the URL form of idem's commands,
// mysql://user:password@host:port/database.
func URL(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := "mysql://" + cfg.User
	if cfg.Passwd != "" {
		u += ":" + cfg.Passwd
	}
	return u + "@" + cfg.Addr + "/" + cfg.DBName
}

func exec(t testing.TB, dsn, stmt string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Errorf("%s: %v", stmt, err)
	}
}

// WithoutRoutines returns dsn (of a database made by Database) reached as
// an account of its own, dropped at clean-up, that has every privilege on
// the database but CREATE ROUTINE and ALTER ROUTINE.
func WithoutRoutines(t testing.TB, dsn string) string {
	t.Helper()
	return without(t, dsn, "idem_nr_", "CREATE ROUTINE, ALTER ROUTINE")
}

// WithoutExecute returns dsn (of a database made by Database) reached as
// an account of its own, dropped at clean-up, that has every privilege on
// the database but EXECUTE: it sees the routines another account made,
// and may not call them.
func WithoutExecute(t testing.TB, dsn string) string {
	t.Helper()
	return without(t, dsn, "idem_nx_", "EXECUTE")
}

// without makes the account of WithoutRoutines and WithoutExecute: every
// privilege on dsn's database but those revoked.
func without(t testing.TB, dsn, prefix, revoked string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	user := prefix + hex.EncodeToString(b[:])
	base := Require(t)
	exec(t, base, "CREATE USER '"+user+"'@'%'")
	t.Cleanup(func() { exec(t, base, "DROP USER IF EXISTS '"+user+"'@'%'") })
	exec(t, base, "GRANT ALL PRIVILEGES ON `"+cfg.DBName+"`.* TO '"+user+"'@'%'")
	exec(t, base, "REVOKE "+revoked+" ON `"+cfg.DBName+"`.* FROM '"+user+"'@'%'")
	cfg.User, cfg.Passwd = user, ""
	return cfg.FormatDSN()
}
