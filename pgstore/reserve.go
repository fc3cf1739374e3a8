package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// reserve is the small pool of Config.ProbeConns connections on which
// Begin probes when the store's pool has no idle connection. It is opened
// at the first such Begin, with the store pool's configuration (the same
// server, credentials, search_path and hooks), so that a store that never
// runs short never holds one.
type reserve struct {
	conns int32 // Config.ProbeConns; none when not positive

	mu     sync.Mutex
	pool   *pgxpool.Pool
	closed bool
}

// reserveIdleTime is how long a reserved connection stays open unused.
const reserveIdleTime = time.Minute

var errClosed = errors.New("pgstore: the store is closed")

// get returns the reserved pool, opening it from main's configuration at
// the first call.
func (r *reserve) get(main *pgxpool.Pool) (*pgxpool.Pool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	if r.pool == nil {
		cfg := main.Config()
		cfg.MaxConns, cfg.MinConns, cfg.MinIdleConns = r.conns, 0, 0
		cfg.MaxConnIdleTime = reserveIdleTime
		cfg.HealthCheckPeriod = reserveIdleTime / 2
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return nil, err
		}
		r.pool = pool
	}
	return r.pool, nil
}

// close closes the reserved pool, if open, and keeps it from opening.
func (r *reserve) close() {
	r.mu.Lock()
	pool := r.pool
	r.pool, r.closed = nil, true
	r.mu.Unlock()
	if pool != nil {
		pool.Close()
	}
}

// starved reports whether a pool in the state st makes an Acquire wait: no
// idle connection, and no room for a new one.
func starved(st *pgxpool.Stat) bool {
	return st.IdleConns() == 0 && st.TotalConns() >= st.MaxConns()
}
