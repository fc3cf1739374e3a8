package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/mysqlurl"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/mysqlstore"
)

// openMySQL opens a fresh database on the server of the mysql:// URL db,
// dropped at close, with a pool of pool connections (16 if 0).
func openMySQL(ctx context.Context, db string, probe bool, pool, probeConns int) (*backend, error) {
	dsn, err := mysqlurl.DSN(db)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", redact(db), err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("idem_bench_%d", time.Now().UnixNano())
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		return nil, fmt.Errorf("bench: create a database on %s: %w", redact(db), err)
	}
	drop := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		admin, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer admin.Close()
		_, err = admin.ExecContext(ctx, "DROP DATABASE `"+name+"`")
		return err
	}
	cfg.DBName = name
	scoped := cfg.FormatDSN()
	if pool <= 0 {
		pool = 16
	}
	openStore := func(ctx context.Context, skip bool) (*mysqlstore.Store, error) {
		s, err := mysqlstore.Open(ctx, scoped, &mysqlstore.Config{ReplayProbe: probe, ProbeConns: probeConns, SkipMigrate: skip})
		if err != nil {
			return nil, err
		}
		s.DB().SetMaxOpenConns(pool)
		s.DB().SetMaxIdleConns(pool)
		return s, nil
	}
	s, err := openStore(ctx, false)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: open %s: %w", redact(db), err), drop(context.WithoutCancel(ctx)))
	}
	var others []*mysqlstore.Store
	return &backend{
		second: func(ctx context.Context) (idem.Store, *transfers.Database, error) {
			s2, err := openStore(ctx, true)
			if err != nil {
				return nil, nil, fmt.Errorf("bench: open a second instance: %w", err)
			}
			others = append(others, s2)
			return s2, transfers.MySQL(s2), nil
		},
		kind:   "mysql",
		probe:  probe,
		desc:   redact(db) + " (database " + name + ", dropped at the end)",
		pool:   pool,
		store:  s,
		ledger: transfers.MySQL(s),
		transfers: func(ctx context.Context) (n int64, err error) {
			err = s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM transfers").Scan(&n)
			return n, err
		},
		close: func(ctx context.Context) error {
			for _, o := range others {
				_ = o.Close()
			}
			_ = s.Close()
			return drop(ctx)
		},
	}, nil
}
