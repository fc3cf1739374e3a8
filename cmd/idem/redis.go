package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/idemkit/idem/redisstore"
)

// isRedis reports whether db names a Redis server rather than a SQL
// database.
func isRedis(db string) bool {
	return strings.HasPrefix(db, "redis://") || strings.HasPrefix(db, "rediss://")
}

// redisPrefixParam is the query parameter of a redis:// -db that sets the
// prefix of the store's keys (redisstore.Config.Prefix): idem's own, not
// go-redis's, so openRedis takes it out of the URL.
const redisPrefixParam = "prefix"

// openRedis opens the Redis store of a redis:// or rediss:// URL (see
// redisConfig). Its errors name the server with any password hidden.
func openRedis(ctx context.Context, db string) (*redisstore.Store, error) {
	raw, cfg, err := redisConfig(db)
	if err != nil {
		return nil, err
	}
	return redisstore.Open(ctx, raw, cfg)
}

// redisConfig splits a redis:// or rediss:// -db into go-redis's URL and
// the store's Config: its ?prefix= is the prefix of the store's keys.
func redisConfig(db string) (string, *redisstore.Config, error) {
	u, err := url.Parse(db)
	if err != nil {
		return "", nil, usageError{fmt.Sprintf("-db %s: %v", redact(db), err)}
	}
	q := u.Query()
	cfg := &redisstore.Config{Prefix: q.Get(redisPrefixParam)}
	switch {
	case q.Has(redisPrefixParam) && cfg.Prefix == "":
		return "", nil, usageError{fmt.Sprintf("-db %s: ?%s= is empty; leave it out for the default prefix", redact(db), redisPrefixParam)}
	case strings.ContainsAny(cfg.Prefix, "{}"):
		return "", nil, usageError{fmt.Sprintf("-db %s: ?%s= must not contain '{' or '}'", redact(db), redisPrefixParam)}
	}
	q.Del(redisPrefixParam)
	u.RawQuery = q.Encode()
	return u.String(), cfg, nil
}

// ledgerDB resolves the -db and -ledger of idem serve and idem complete:
// the SQL database of the ledger and the atomic records (with a redis://
// -db, -ledger, or the embedded default idem.db), and the Redis server of
// the leased records ("" when they live in the SQL database too). cmd
// names the command in errors.
func ledgerDB(cmd, db, ledger string) (sqlDB, redisDB string, err error) {
	switch {
	case isRedis(ledger):
		return "", "", usageError{fmt.Sprintf("%s: -ledger must be a SQL database (a SQLite file path, a postgres:// URL or a mysql:// URL), got %s", cmd, redact(ledger))}
	case !isRedis(db) && ledger != "":
		return "", "", usageError{fmt.Sprintf("%s: -ledger applies only with a redis:// -db; without Redis, the ledger and every record live in -db", cmd)}
	case isRedis(db):
		if ledger == "" {
			// Redis keeps leased-mode records only; the ledger and the
			// atomic records of POST /transfers need SQL: the embedded
			// default, unless -ledger names another.
			ledger = defaultDB
		}
		if _, _, err := redisConfig(db); err != nil {
			return "", "", usageError{cmd + ": " + err.Error()}
		}
		return ledger, db, nil
	}
	return db, "", nil
}

// needSQL refuses a redis:// -db for the commands that work on the SQL
// database only; why says what they would do there.
func needSQL(cmd, db, why string) error {
	if !isRedis(db) {
		return nil
	}
	return usageError{fmt.Sprintf("%s: -db %s is a Redis server, which keeps only the leased records of payouts (idem serve -db redis://… -ledger …); %s: give a SQLite file path, a postgres:// URL or a mysql:// URL (with Redis, idem serve's -ledger)",
		cmd, redact(db), why)}
}
