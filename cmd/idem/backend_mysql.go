package main

import (
	"context"
	"fmt"

	"github.com/idemkit/idem/cmd/idem/internal/mysqlurl"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/mysqlstore"
)

func isMySQL(db string) bool { return mysqlurl.IsURL(db) }

// isSQLServer reports whether db names a database server (PostgreSQL or
// MySQL) rather than a SQLite file: one that several processes share and
// whose pool size means something.
func isSQLServer(db string) bool { return isPostgres(db) || isMySQL(db) }

// defaultMySQLPool is the number of connections a MySQL backend opens at
// most when the command gives none (database/sql's default is no limit).
const defaultMySQLPool = 16

func openMySQL(ctx context.Context, db string, opts backendOptions) (*backend, error) {
	dsn, err := mysqlurl.DSN(db)
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
