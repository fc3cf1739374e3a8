package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/mysqlstore"
)

func isMySQL(db string) bool { return strings.HasPrefix(db, "mysql://") }

// isSQLServer reports whether db names a database server (PostgreSQL or
// MySQL) rather than a SQLite file: one that several processes share and
// whose pool size means something.
func isSQLServer(db string) bool { return isPostgres(db) || isMySQL(db) }

// mysqlDSN turns a mysql://user:password@host:port/database?param=value URL
// into go-sql-driver/mysql's DSN. The parameters are the driver's (see
// mysql.ParseDSN; any other is a system variable the driver sets on each
// connection). Unless the URL says otherwise, the connections count
// matched rows (clientFoundRows=true, which the ledger needs), send their
// parameters within the statement (interpolateParams=true: one round trip
// a statement) and give up connecting after 10 seconds.
func mysqlDSN(db string) (string, error) {
	u, err := url.Parse(db)
	if err != nil {
		return "", errors.New("not a mysql://user:password@host:port/database URL")
	}
	host := u.Host
	if host == "" {
		return "", errors.New("the URL names no host: mysql://user:password@host:port/database")
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || strings.Contains(name, "/") {
		return "", errors.New("the URL names no database: mysql://user:password@host:port/database")
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", host, name
	q := u.Query()
	// The driver parses the parameters itself: hand it the query, then
	// put the credentials and the address from the URL back.
	parsed, err := mysql.ParseDSN("tcp(" + host + ")/" + url.PathEscape(name) + "?" + q.Encode())
	if err != nil {
		return "", fmt.Errorf("the URL's parameters: %w", err)
	}
	parsed.User, parsed.Passwd = cfg.User, cfg.Passwd
	if !q.Has("clientFoundRows") {
		parsed.ClientFoundRows = true
	}
	if !q.Has("interpolateParams") {
		parsed.InterpolateParams = true
	}
	if !q.Has("timeout") {
		parsed.Timeout = 10 * time.Second
	}
	return parsed.FormatDSN(), nil
}

// defaultMySQLPool is the number of connections a MySQL backend opens at
// most when the command gives none (database/sql's default is no limit).
const defaultMySQLPool = 16

func openMySQL(ctx context.Context, db string, opts backendOptions) (*backend, error) {
	dsn, err := mysqlDSN(db)
	if err != nil {
		return nil, usageError{"-db " + redact(db) + ": " + err.Error()}
	}
	s, err := mysqlstore.Open(ctx, dsn, &mysqlstore.Config{ReplayProbe: opts.replayProbe, SkipMigrate: opts.existing})
	if err != nil {
		return nil, err
	}
	pool := opts.pool
	if pool <= 0 {
		pool = defaultMySQLPool
	}
	s.DB().SetMaxOpenConns(pool)
	s.DB().SetMaxIdleConns(pool)
	if opts.existing {
		var n int
		err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
			s.Database(), s.Table()).Scan(&n)
		if err == nil && n == 0 {
			err = fmt.Errorf("no records table %q in database %q (idem serve creates it when it starts); check -db's database", s.Table(), s.Database())
		}
		if err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return &backend{store: s, ledger: transfers.MySQL(s), close: s.Close}, nil
}
