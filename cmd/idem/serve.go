package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/inbox"
)

// defaultPool is the default PostgreSQL pool size of idem serve. pgxpool's
// own default, the larger of 4 and the number of CPUs, is sized for
// CPU-bound work; but a request here holds its connection for its whole
// transaction (the key's lock, the effect, the commit), mostly waiting on
// round trips rather than on the server's CPU, so a pool of 4 queues the
// fifth concurrent request however idle the database is. 16 serves the
// bench's 8 clients without queueing and keeps several instances well
// under PostgreSQL's default max_connections of 100; the pool opens
// connections only as they are needed.
const defaultPool = 16

const serveSynopsis = `serve [-addr 127.0.0.1:8080] [-db idem.db | postgres://… | redis://… [-ledger idem.db | postgres://…]] [-idempotency on|off] [-ttl 24h] [-pool 16] [-body-timeout 10s] [-request-timeout 10s] [-idle-timeout 60s] [-grace 25s] [-max-concurrent 128] [-replay-probe] [-consume URL [-consume-queue transfers] [-consume-ttl 168h]] [-provider URL [-lease 30s] [-provider-timeout 2s] [-complete-interval 5s] [-report-after 15m]] [-otlp URL]

serve runs the transfers service: PUT and GET /accounts/{id}, POST /transfers
(Idempotency-Key required), GET /transfers[?limit=N] and /transfers/{id},
GET /healthz (liveness), GET /readyz (the database answers), GET /metrics.

With -consume it also applies transfer commands from a broker (body: the JSON
of POST /transfers), each message id once, in one transaction with the
transfer (see docs/CONSUMERS.md).

With -provider it also serves payouts through that payment provider: POST
/payouts {"account","amount"} (Idempotency-Key required) debits the account,
charges it at POST {URL}/charges with a key derived from the request's, and
answers 201, or 422 payout-declined once the account is credited back, or 503
with Retry-After while the provider's answer is unknown; GET /payouts lists
them. A completer finishes the payouts left pending every -complete-interval
(see docs/PAYOUTS.md; "idem complete" makes one pass).

With -db redis://host:6379/0[?prefix=idem] the payouts' leased records live
in Redis (keys starting with the prefix, "idem" by default) and -ledger names
the SQL database of everything else (idem.db by default): the ledger
(accounts, transfers, payouts) and the records of POST /transfers, which
atomic mode commits with the transfer, since Redis cannot. It needs -provider
(see docs/PAYOUTS.md, "On Redis").`

type serveCommand struct {
	*Main
}

func (c *serveCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	db := fs.String("db", defaultDB, "SQLite file path, or a postgres:// URL; or a redis:// URL (rediss:// for TLS; ?prefix= sets the keys' prefix) for the payouts' leased records, with -ledger and -provider")
	ledger := fs.String("ledger", "", "with a redis:// -db: the SQL database (SQLite file path, or a postgres:// URL) of the ledger and of the records of POST /transfers; defaults to "+defaultDB)
	mode := fs.String("idempotency", "on", `"on", or "off" to run the same service without idem (keys ignored; for comparisons only)`)
	ttl := fs.Duration("ttl", idem.DefaultTTL, "how long idempotency records are kept and replayed")
	pool := fs.Int("pool", defaultPool, "PostgreSQL: the most connections the service opens (pgxpool's pool_max_conns; a pool_max_conns in -db wins over the default). Not for SQLite, which writes one transaction at a time whatever the pool")
	maxConcurrent := fs.Int("max-concurrent", transfers.DefaultMaxConcurrent, "most POST /transfers received and served at once; the next is answered 503 too-busy before its body is read")
	bodyTimeout := fs.Duration("body-timeout", transfers.DefaultBodyTimeout, "longest a client may take to send a request body; a slower one is answered 408 and nothing runs")
	timeout := fs.Duration("request-timeout", transfers.DefaultRequestTimeout, "longest a request may wait and work once its body has arrived; past it, its database work is cancelled, rolled back and answered 503")
	idle := fs.Duration("idle-timeout", 60*time.Second, "how long an idle keep-alive connection is kept open")
	grace := fs.Duration("grace", 25*time.Second, "on SIGINT or SIGTERM, how long running requests may take to finish before the remaining connections are closed; exit status 1 if a request was still running then")
	probe := fs.Bool("replay-probe", false, "PostgreSQL: answer replays and in-flight refusals in one round trip, at one more round trip per first execution")
	consume := fs.String("consume", "", "also consume transfer commands from this broker URL: nats://host:4222 (JetStream) or amqp://user:pass@host:5672/vhost (RabbitMQ)")
	queue := fs.String("consume-queue", defaultConsumeQueue, "with -consume: the subject (NATS) or queue (RabbitMQ) to consume; 1 to 64 ASCII letters, digits, - and _")
	consumeTTL := fs.Duration("consume-ttl", inbox.DefaultTTL, "with -consume: how long a message id is remembered; a duplicate arriving later is applied again")
	lf := leasedFlags(fs)
	completeInterval := fs.Duration("complete-interval", 5*time.Second, "with -provider: the pause between two passes of the completer, which finishes the payouts left pending")
	otlp := fs.String("otlp", "", "export traces over OTLP/HTTP to this collector base URL (http://127.0.0.1:4318); defaults to OTEL_EXPORTER_OTLP_ENDPOINT, and to no tracing when neither is set")
	if err := c.parse(fs, args, serveSynopsis); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("serve: unexpected argument %q (run \"idem serve -h\")", fs.Arg(0))}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ttl", *ttl}, {"body-timeout", *bodyTimeout}, {"request-timeout", *timeout}, {"idle-timeout", *idle}, {"grace", *grace}, {"consume-ttl", *consumeTTL}} {
		if d.v <= 0 {
			return usageError{fmt.Sprintf("serve: -%s must be positive, got %s", d.name, d.v)}
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	sqlDB, redisDB, err := ledgerDB("serve", *db, *ledger)
	if err != nil {
		return err
	}
	if redisDB != "" && *lf.provider == "" {
		return usageError{fmt.Sprintf("serve: -db %s: Redis keeps leased-mode records only, those of the payouts, and there are no payouts without -provider; "+
			"the transfers service needs SQL for its ledger (accounts, transfers, payouts) and for the atomic records of POST /transfers: "+
			"give -db a SQLite file path or a postgres:// URL, or add -provider URL to serve payouts with their records in Redis and the ledger in -ledger (idem.db by default)", redact(redisDB))}
	}
	poolSet := set["pool"]
	switch {
	case *pool < 1:
		return usageError{fmt.Sprintf("serve: -pool must be positive, got %d", *pool)}
	case *maxConcurrent < 1:
		return usageError{fmt.Sprintf("serve: -max-concurrent must be positive, got %d", *maxConcurrent)}
	case poolSet && !isPostgres(sqlDB):
		return usageError{"serve: -pool applies to PostgreSQL only (SQLite writes one transaction at a time whatever the pool)"}
	}
	if *probe && !isPostgres(sqlDB) {
		return usageError{"serve: -replay-probe applies to PostgreSQL only"}
	}
	if *mode != "on" && *mode != "off" {
		return usageError{fmt.Sprintf(`serve: -idempotency must be "on" or "off", got %q`, *mode)}
	}
	var source consumeSource
	switch {
	case *consume == "" && (set["consume-queue"] || set["consume-ttl"]):
		return usageError{"serve: -consume-queue and -consume-ttl apply only with -consume"}
	case *consume == "":
	case !validQueueName(*queue):
		return usageError{fmt.Sprintf("serve: -consume-queue must be 1 to %d ASCII letters, digits, - and _, got %q", maxQueueName, *queue)}
	case *mode == "off":
		return usageError{"serve: -consume needs -idempotency on: the inbox is what applies each message once"}
	default:
		var err error
		if source, err = consumeSourceFor(*consume); err != nil {
			return err
		}
	}
	if *lf.provider == "" {
		for _, name := range []string{"lease", "provider-timeout", "complete-interval", "report-after"} {
			if set[name] {
				return usageError{fmt.Sprintf("serve: -%s applies only with -provider", name)}
			}
		}
	} else {
		if *mode == "off" {
			return usageError{"serve: -provider needs -idempotency on: leased mode is what charges each payout once"}
		}
		if err := lf.validate("serve", *ttl); err != nil {
			return err
		}
		if *completeInterval <= 0 {
			return usageError{fmt.Sprintf("serve: -complete-interval must be positive, got %s", *completeInterval)}
		}
	}
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))

	opts := backendOptions{replayProbe: *probe}
	if isPostgres(sqlDB) {
		opts.pool, opts.poolExplicit = *pool, poolSet
	}
	b, err := openBackend(ctx, sqlDB, opts)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer closeWithin(b.close, 5*time.Second, log)
	leasedStore, closeLeased, err := openLeased(ctx, b, redisDB)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer closeLeased()
	cfg := &transfers.Config{Logger: log, BodyTimeout: *bodyTimeout, RequestTimeout: *timeout, MaxConcurrent: *maxConcurrent}
	reg, err := setupMetrics(cfg, b.pool)
	if err != nil {
		return err
	}
	tr, err := setupTracing(ctx, *otlp, cfg, log)
	if err != nil {
		return err
	}
	defer tr.shutdown(log)
	if *mode == "on" {
		if cfg.Guard, err = idem.New(tr.store(b.store), &idem.Config{TTL: *ttl}); err != nil {
			return err
		}
		if d, ok := b.store.(idem.ExpiredDeleter); ok {
			sw, err := idem.NewSweeper(d, &idem.SweeperConfig{Logger: log})
			if err != nil {
				return err
			}
			go sw.Run(ctx)
		}
		if *lf.provider != "" {
			if err := lf.configure(cfg, leasedStore, *ttl); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
		}
	} else {
		log.Warn("IDEMPOTENCY IS OFF: Idempotency-Key is ignored and every retry runs again; use this mode only to compare")
	}
	svc, err := transfers.New(ctx, b.ledger, cfg)
	if err != nil {
		return err
	}
	if cfg.Leased != nil {
		// Stopped, and waited for, before the store closes.
		m := newCompleterMetrics(reg, idemhttp.KindPrefix+transfers.PayoutKind)
		stop, err := startCompleter(ctx, cfg.Leased, *completeInterval, *lf.reportAfter, m, log)
		if err != nil {
			return err
		}
		defer stop()
	}

	// The stream or queue exists before the service answers /healthz:
	// the source is opened first. However serve returns, the consumer is
	// stopped, and waited for, before the store closes (deferred above).
	var cons *consumer
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer func() {
		stopConsuming()
		if cons != nil {
			cons.wait(*grace, log)
		}
	}()
	if source != nil {
		ib, err := inbox.New(b.store, &inbox.Config{Name: consumerName, TTL: *consumeTTL, Logger: log, Observer: inboxMetrics(reg, consumerName)})
		if err != nil {
			return err
		}
		run, err := source(ctx, consumeParams{URL: *consume, Queue: *queue, Inbox: ib, Handler: svc.ApplyMessage, Logger: log})
		if err != nil {
			return fmt.Errorf("serve: -consume %s: %w", redactURL(*consume), err)
		}
		log.Info("idem serve: consuming", "consume", redactURL(*consume), "queue", *queue, "inbox", ib.Scope())
		cons = startConsumer(consumeCtx, run, log)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var running atomic.Int64
	srv := &http.Server{
		Handler:           tr.handler(countRunning(svc, &running)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       *idle,
	}
	attrs := []any{"addr", "http://" + ln.Addr().String(), "db", redact(*db), "idempotency", *mode}
	if redisDB != "" {
		attrs = append(attrs, "ledger", redact(sqlDB))
	}
	if cfg.Leased != nil {
		attrs = append(attrs, "provider", redactURL(*lf.provider), "lease", *lf.lease)
	}
	if b.pool != nil {
		attrs = append(attrs, "pool", b.pool.Config().MaxConns)
	}
	log.Info("idem serve: listening", attrs...)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var consumerDone <-chan struct{} // nil without -consume: never ready
	if cons != nil {
		consumerDone = cons.done
	}
	var failed error
	select {
	case err := <-errc:
		return err
	case <-consumerDone:
		// A server that no longer consumes must say so: exit, and let
		// the supervisor restart it.
		failed = fmt.Errorf("serve: -consume: %w", cons.err)
		log.Error("idem serve: shutting down: the consumer stopped", "grace", *grace)
	case <-ctx.Done():
		log.Info("idem serve: shutting down", "grace", *grace)
	}
	// Stop consuming and serving together; the store closes only once
	// both are done, so that no message is processed on a closed store.
	stopConsuming()
	err = shutdown(context.WithoutCancel(ctx), srv, errc, &running, *grace, log)
	return errors.Join(failed, err)
}

// shutdown stops srv: it stops accepting, lets running requests finish
// for up to grace, then closes the connections left (idle ones, or ones
// whose client is still sending). It fails only if a request was still
// running when the grace ran out: that request's transaction rolls back
// and its client's retry runs it again, but its answer was lost.
func shutdown(ctx context.Context, srv *http.Server, errc <-chan error, running *atomic.Int64, grace time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		n := running.Load()
		_ = srv.Close()
		if n > 0 {
			return fmt.Errorf("serve: %d request(s) still running after the %s grace were cut off; their transactions roll back", n, grace)
		}
		log.Info("idem serve: closed the connections left after the grace; no request was running")
		err = nil
	}
	if err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// countRunning counts the requests whose handler is running.
func countRunning(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		defer n.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// closeWithin closes the database, waiting at most d: a pool waits for its
// connections to come back, and one held by a request cut off at shutdown
// may not come back in time. The process is exiting; the database rolls
// back what it leaves.
func closeWithin(closeDB func() error, d time.Duration, log *slog.Logger) {
	done := make(chan struct{})
	go func() { _ = closeDB(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		log.Warn("idem serve: the database did not close within " + d.String() + "; exiting anyway")
	}
}
