package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/transfers"
)

type serveCommand struct {
	*Main
}

func (c *serveCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	db := fs.String("db", defaultDB, "SQLite file path, or a postgres:// URL")
	mode := fs.String("idempotency", "on", `"on", or "off" to run the same service without idem (keys ignored; for comparisons only)`)
	ttl := fs.Duration("ttl", idem.DefaultTTL, "how long idempotency records are kept and replayed")
	timeout := fs.Duration("request-timeout", 10*time.Second, "longest a request may wait and work; past it, its database work is cancelled, rolled back and answered 503")
	probe := fs.Bool("replay-probe", false, "PostgreSQL: answer replays and in-flight refusals in one round trip, at one more round trip per first execution")
	if err := c.parse(fs, args, "serve [-addr 127.0.0.1:8080] [-db idem.db | postgres://…] [-idempotency on|off] [-ttl 24h] [-request-timeout 10s] [-replay-probe]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("serve: unexpected argument %q (run \"idem serve -h\")", fs.Arg(0))}
	}
	if *ttl <= 0 {
		return usageError{fmt.Sprintf("serve: -ttl must be positive, got %s", *ttl)}
	}
	if *timeout <= 0 {
		return usageError{fmt.Sprintf("serve: -request-timeout must be positive, got %s", *timeout)}
	}
	if *probe && !isPostgres(*db) {
		return usageError{"serve: -replay-probe applies to PostgreSQL only"}
	}
	if *mode != "on" && *mode != "off" {
		return usageError{fmt.Sprintf(`serve: -idempotency must be "on" or "off", got %q`, *mode)}
	}
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))

	b, err := openBackend(ctx, *db, backendOptions{replayProbe: *probe})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer b.close()
	cfg := &transfers.Config{Logger: log}
	if err := setupMetrics(cfg); err != nil {
		return err
	}
	if *mode == "on" {
		if cfg.Guard, err = idem.New(b.store, &idem.Config{TTL: *ttl}); err != nil {
			return err
		}
		if d, ok := b.store.(idem.ExpiredDeleter); ok {
			sw, err := idem.NewSweeper(d, &idem.SweeperConfig{Logger: log})
			if err != nil {
				return err
			}
			go sw.Run(ctx)
		}
	} else {
		log.Warn("IDEMPOTENCY IS OFF: Idempotency-Key is ignored and every retry runs again; use this mode only to compare")
	}
	svc, err := transfers.New(ctx, b.ledger, cfg)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := &http.Server{Handler: withDeadline(svc, *timeout), ReadHeaderTimeout: 10 * time.Second}
	log.Info("idem serve: listening", "addr", "http://"+ln.Addr().String(), "db", redact(*db), "idempotency", *mode)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("idem serve: shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// withDeadline bounds each request's context by d, so that no request waits
// without end on a stalled database (a held lock, an exhausted pool): its
// statements are cancelled, its transaction rolled back, and it is answered
// 503 with Retry-After, which the client retries with the same key.
func withDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
