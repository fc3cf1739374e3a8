package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrPoolerStatementCache is the error New returns for a pool that reaches
// PostgreSQL through a connection pooler (PgBouncer, say) and prepares
// named statements on its connections, pgx's default
// (pgx.QueryExecModeCacheStatement): behind transaction pooling, a
// client's statements land on server connections that other clients
// prepared, and fail with "prepared statement already exists" (SQLSTATE
// 42P05) or "does not exist" (26000). See docs/POSTGRES.md, "PgBouncer".
var ErrPoolerStatementCache = errors.New("pgstore: the pool reaches PostgreSQL through a connection pooler and caches prepared statements, which fails behind transaction pooling (SQLSTATE 42P05); " +
	"set default_query_exec_mode=exec in the URL (or ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec), or let Open build the pool")

// behindPooler reports whether conn reaches its server through a
// connection pooler: the backend that runs its statements is not the one
// whose process id the connection was given at start-up (a pooler hands
// out a key of its own). The query goes by the simple protocol, which
// prepares nothing.
func behindPooler(ctx context.Context, conn *pgconn.PgConn) (bool, error) {
	res, err := conn.Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil {
		return false, err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return false, fmt.Errorf("SELECT pg_backend_pid(): unexpected answer")
	}
	pid, err := strconv.ParseUint(string(res[0].Rows[0][0]), 10, 32)
	if err != nil {
		return false, fmt.Errorf("SELECT pg_backend_pid(): %w", err)
	}
	return uint32(pid) != conn.PID(), nil
}

// poolBehindPooler asks one connection of pool whether a pooler stands
// between the pool and the server.
func poolBehindPooler(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	return behindPooler(ctx, conn.Conn().PgConn())
}

// checkPooler refuses a pool behind a pooler whose connections cache
// prepared statements (ErrPoolerStatementCache). A server that does not
// answer yet is not refused: New never fails for an unreachable server
// (its calls answer idem.ErrUnavailable until it does), so the check is
// made only when the server answers at New.
func checkPooler(ctx context.Context, pool *pgxpool.Pool) error {
	if pool.Config().ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return nil
	}
	pooled, err := poolBehindPooler(ctx, pool)
	if err != nil {
		return nil
	}
	if pooled {
		return ErrPoolerStatementCache
	}
	return nil
}

// openPool connects the pool of Open. Unless connString chooses a query
// mode (default_query_exec_mode), a pool that turns out to reach the
// server through a pooler is replaced by one in pgx.QueryExecModeExec,
// which prepares no named statement and so works behind transaction and
// session pooling alike; the direct path keeps pgx's statement cache.
func openPool(ctx context.Context, connString string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	if strings.Contains(connString, "default_query_exec_mode") || cfg.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return pgxpool.NewWithConfig(ctx, cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, err
	}
	pooled, err := poolBehindPooler(ctx, pool)
	if err != nil || !pooled {
		// An unreachable server is New's to report, as before.
		return pool, nil
	}
	pool.Close()
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	return pgxpool.NewWithConfig(ctx, cfg)
}
