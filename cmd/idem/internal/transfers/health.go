package transfers

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// readyTimeout bounds the database check of GET /readyz.
const readyTimeout = 2 * time.Second

// healthz is the liveness check: the process serves HTTP. It does not
// touch the database, so that a database outage does not get a healthy
// process restarted.
func (s *Service) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz is the readiness check: the ledger's database answers a query
// within readyTimeout. 503 while it does not, so that a load balancer
// sends requests elsewhere rather than to a service whose every write
// fails.
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), min(readyTimeout, s.cfg.RequestTimeout))
	defer cancel()
	var n int
	if err := s.db.pool.queryRow(ctx, `SELECT count(*) FROM accounts WHERE id = ''`).Scan(&n); err != nil {
		s.cfg.Logger.WarnContext(r.Context(), "transfers: not ready: the database does not answer", "err", err)
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusServiceUnavailable, "not-ready", "Not ready", "the database does not answer")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}
