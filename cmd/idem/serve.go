package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
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

const serveSynopsis = `serve [-addr 127.0.0.1:8080] [-db idem.db | postgres://… | mysql://… | redis://… [-ledger idem.db | postgres://… | mysql://…]] [-idempotency on|off] [-ttl 24h] [-replay-cache 32MiB] [-pool 16] [-body-timeout 10s] [-request-timeout 10s] [-idle-timeout 60s] [-grace 25s] [-max-concurrent 128] [-replay-probe] [-consume URL [-consume-queue transfers] [-consume-ttl 168h]] [-provider URL [-lease 30s] [-provider-timeout 2s] [-complete-interval 5s] [-report-after 15m] [-orphan-after 15m]] [-publish URL [-events transfers]] [-otlp URL] [-log-level debug|info|warn|error]

serve runs the transfers service: PUT and GET /accounts/{id}, POST /transfers
(Idempotency-Key required), GET /transfers[?limit=N] and /transfers/{id},
GET /healthz (liveness), GET /readyz (the database answers), GET /metrics.

With -consume it also applies transfer commands from a broker (body: the JSON
of POST /transfers), each message id once, in one transaction with the
transfer (see docs/CONSUMERS.md).

With -publish it stages one event per applied transfer (over HTTP, from a
message, from an import row) in the transfer's own transaction, and its relay
publishes them: NATS stream TRANSFER_EVENTS, subject transfers.created, or
RabbitMQ durable fanout exchange transfers.events; the message id is the
event id (see docs/PROJECTION.md).

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
(see docs/PAYOUTS.md, "On Redis").

-replay-cache bounds the memory of the replay cache, which answers retries
of recent keys without a database call: bytes, or with a KiB, MiB or GiB
suffix; 0 turns it off, and every retry is then answered from the database.
Unless GOMEMLIMIT is set (a size, or off), serve gives the Go runtime a soft
memory limit of the cache's bound plus 32 MiB, so that the collector does not
let a full cache cost twice its bound (docs/BENCHMARKS.md#memory).

-log-level sets the least level of the lines serve logs to stderr (debug,
info, warn or error; info by default); at debug, each request's outcome is
logged.`

type serveCommand struct {
	*Main
}

// serveOptions is idem serve's command line.
type serveOptions struct {
	commandLine
	addr, db, ledger, mode string
	ttl                    time.Duration
	pool, maxConcurrent    int
	bodyTimeout, timeout   time.Duration
	idle, grace            time.Duration
	probe                  bool
	consume, queue         string
	consumeTTL             time.Duration
	publish, events        string
	leased                 leasedOptions
	completeInterval       time.Duration
	orphanAfter            time.Duration
	otlp, logLevel         string
	replayCache            string
	admin                  adminOptions // the console's (serve_admin.go)
	webhookSecrets         secretFlags

	// Set by validate.
	sqlDB, redisDB string        // see ledgerDB
	source         consumeSource // of -consume; nil without it
	level          slog.Level    // of -log-level
	cacheBytes     int64         // of -replay-cache: idem.Config.ReplayCacheBytes
}

func (o *serveOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, a postgres:// URL or a mysql:// URL; or a redis:// URL (rediss:// for TLS; ?prefix= sets the keys' prefix) for the payouts' leased records, with -ledger and -provider")
	fs.StringVar(&o.ledger, "ledger", "", "with a redis:// -db: the SQL database (SQLite file path, postgres:// or mysql:// URL) of the ledger and of the records of POST /transfers; defaults to "+defaultDB)
	fs.StringVar(&o.mode, "idempotency", "on", `"on", or "off" to run the same service without idem (keys ignored; for comparisons only)`)
	fs.DurationVar(&o.ttl, "ttl", idem.DefaultTTL, "how long idempotency records are kept and replayed")
	fs.StringVar(&o.replayCache, "replay-cache", "32MiB", "the most memory the replay cache takes, which answers retries of recent keys without a database call: a `size` in bytes, with an optional KiB, MiB or GiB suffix; 0 turns the cache off")
	fs.IntVar(&o.pool, "pool", defaultPool, "PostgreSQL: the most connections the service opens (pgxpool's pool_max_conns; a pool_max_conns in -db wins over the default). Not for SQLite, which writes one transaction at a time whatever the pool")
	fs.IntVar(&o.maxConcurrent, "max-concurrent", transfers.DefaultMaxConcurrent, "most POST /transfers received and served at once; the next is answered 503 too-busy before its body is read")
	fs.DurationVar(&o.bodyTimeout, "body-timeout", transfers.DefaultBodyTimeout, "longest a client may take to send a request body; a slower one is answered 408 and nothing runs")
	fs.DurationVar(&o.timeout, "request-timeout", transfers.DefaultRequestTimeout, "longest a request may wait and work once its body has arrived; past it, its database work is cancelled, rolled back and answered 503")
	fs.DurationVar(&o.idle, "idle-timeout", 60*time.Second, "how long an idle keep-alive connection is kept open")
	fs.DurationVar(&o.grace, "grace", 25*time.Second, "on SIGINT or SIGTERM, how long running requests may take to finish before the remaining connections are closed; exit status 1 if a request was still running then")
	fs.BoolVar(&o.probe, "replay-probe", false, "PostgreSQL: answer replays and in-flight refusals in one round trip, at one more round trip per first execution")
	fs.StringVar(&o.consume, "consume", "", "also consume transfer commands from this broker URL: nats://host:4222 (JetStream) or amqp://user:pass@host:5672/vhost (RabbitMQ)")
	fs.StringVar(&o.queue, "consume-queue", defaultConsumeQueue, "with -consume: the subject (NATS) or queue (RabbitMQ) to consume; 1 to 64 ASCII letters, digits, - and _")
	fs.DurationVar(&o.consumeTTL, "consume-ttl", inbox.DefaultTTL, "with -consume: how long a message id is remembered; a duplicate arriving later is applied again")
	fs.StringVar(&o.publish, "publish", "", "stage an event per applied transfer and relay them to this broker URL: nats://host:4222 (JetStream) or amqp://user:pass@host:5672/vhost (RabbitMQ)")
	fs.StringVar(&o.events, "events", defaultEvents, "with -publish: the name the events' stream, subject and exchange derive from; 1 to 64 ASCII letters, digits, - and _")
	o.leased.flags(fs)
	fs.DurationVar(&o.completeInterval, "complete-interval", 5*time.Second, "with -provider: the pause between two passes of the completer, which finishes the payouts left pending")
	fs.DurationVar(&o.orphanAfter, "orphan-after", transfers.DefaultOrphanAfter, "with -provider: how long a payout may stay pending in the ledger with no execution taking it up before the orphan scan (every -complete-interval) takes it for one whose leased record was lost, and finishes or reports it")
	fs.StringVar(&o.otlp, "otlp", "", "export traces over OTLP/HTTP to this collector base URL (http://127.0.0.1:4318); defaults to OTEL_EXPORTER_OTLP_ENDPOINT, and to no tracing when neither is set")
	o.admin.flags(fs)
	fs.Var(&o.webhookSecrets, "webhook-secret", webhookSecretUsage)
	fs.StringVar(&o.logLevel, "log-level", "info", "the least level of the lines logged to stderr: debug, info, warn or error; at debug, each request's outcome is logged")
}

func (o *serveOptions) validate() error {
	if err := o.noArgs("serve"); err != nil {
		return err
	}
	if err := o.admin.validate(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ttl", o.ttl}, {"body-timeout", o.bodyTimeout}, {"request-timeout", o.timeout}, {"idle-timeout", o.idle}, {"grace", o.grace}, {"consume-ttl", o.consumeTTL}} {
		if d.v <= 0 {
			return usageError{fmt.Sprintf("serve: -%s must be positive, got %s", d.name, d.v)}
		}
	}
	var err error
	if o.sqlDB, o.redisDB, err = ledgerDB("serve", o.db, o.ledger); err != nil {
		return err
	}
	if o.redisDB != "" && o.leased.provider == "" {
		return usageError{fmt.Sprintf("serve: -db %s: Redis keeps leased-mode records only, those of the payouts, and there are no payouts without -provider; "+
			"the transfers service needs SQL for its ledger (accounts, transfers, payouts) and for the atomic records of POST /transfers: "+
			"give -db a SQLite file path, a postgres:// URL or a mysql:// URL, or add -provider URL to serve payouts with their records in Redis and the ledger in -ledger (idem.db by default)", redact(o.redisDB))}
	}
	switch {
	case o.pool < 1:
		return usageError{fmt.Sprintf("serve: -pool must be positive, got %d", o.pool)}
	case o.maxConcurrent < 1:
		return usageError{fmt.Sprintf("serve: -max-concurrent must be positive, got %d", o.maxConcurrent)}
	case o.given["pool"] && !isSQLServer(o.sqlDB):
		return usageError{"serve: -pool applies to PostgreSQL and MySQL only (SQLite writes one transaction at a time whatever the pool)"}
	}
	if o.probe && !isSQLServer(o.sqlDB) {
		return usageError{"serve: -replay-probe applies to PostgreSQL and MySQL only"}
	}
	if o.mode != "on" && o.mode != "off" {
		return usageError{fmt.Sprintf(`serve: -idempotency must be "on" or "off", got %q`, o.mode)}
	}
	if o.cacheBytes, err = parseCacheSize(o.replayCache); err != nil {
		return usageError{fmt.Sprintf("serve: -replay-cache %s, got %q", err, o.replayCache)}
	}
	if len(o.webhookSecrets) > 0 && o.mode == "off" {
		return usageError{"serve: -webhook-secret needs -idempotency on: the records are what apply each delivery once"}
	}
	if o.given["replay-cache"] && o.mode == "off" {
		return usageError{"serve: -replay-cache applies only with -idempotency on"}
	}
	switch {
	case o.consume == "" && (o.given["consume-queue"] || o.given["consume-ttl"]):
		return usageError{"serve: -consume-queue and -consume-ttl apply only with -consume"}
	case o.consume == "":
	case !validQueueName(o.queue):
		return usageError{fmt.Sprintf("serve: -consume-queue must be 1 to %d ASCII letters, digits, - and _, got %q", maxQueueName, o.queue)}
	case o.mode == "off":
		return usageError{"serve: -consume needs -idempotency on: the inbox is what applies each message once"}
	default:
		if o.source, err = consumeSourceFor(o.consume); err != nil {
			return err
		}
	}
	switch {
	case o.publish == "" && o.given["events"]:
		return usageError{"serve: -events applies only with -publish"}
	case o.publish == "":
	case o.mode == "off":
		return usageError{"serve: -publish needs -idempotency on: events are staged in the key's transaction"}
	default:
		if err := validEvents("serve", o.events); err != nil {
			return err
		}
		if err := validPublish("serve", o.publish); err != nil {
			return err
		}
	}
	if o.leased.provider == "" {
		for _, name := range []string{"lease", "provider-timeout", "complete-interval", "report-after", "orphan-after"} {
			if o.given[name] {
				return usageError{fmt.Sprintf("serve: -%s applies only with -provider", name)}
			}
		}
	} else {
		if o.mode == "off" {
			return usageError{"serve: -provider needs -idempotency on: leased mode is what charges each payout once"}
		}
		if err := o.leased.validate("serve", o.ttl); err != nil {
			return err
		}
		if o.completeInterval <= 0 {
			return usageError{fmt.Sprintf("serve: -complete-interval must be positive, got %s", o.completeInterval)}
		}
		if o.orphanAfter <= 0 {
			return usageError{fmt.Sprintf("serve: -orphan-after must be positive, got %s", o.orphanAfter)}
		}
	}
	if o.otlp != "" {
		if _, err := otlpURL(o.otlp); err != nil {
			return err
		}
	}
	switch o.logLevel {
	case "debug":
		o.level = slog.LevelDebug
	case "info":
		o.level = slog.LevelInfo
	case "warn":
		o.level = slog.LevelWarn
	case "error":
		o.level = slog.LevelError
	default:
		return usageError{fmt.Sprintf("serve: -log-level must be debug, info, warn or error, got %q", o.logLevel)}
	}
	return nil
}

// Run parses args, validates them and runs idem serve.
func (c *serveCommand) Run(ctx context.Context, args []string) error {
	o := new(serveOptions)
	if err := c.parseOptions("serve", serveSynopsis, flagsFirst, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *serveCommand) run(ctx context.Context, o *serveOptions) error {
	log := slog.New(slog.NewTextHandler(c.Stderr, &slog.HandlerOptions{Level: o.level}))

	opts := backendOptions{replayProbe: o.probe}
	if isSQLServer(o.sqlDB) {
		opts.pool, opts.poolExplicit = o.pool, o.given["pool"]
	}
	b, err := openBackend(ctx, o.sqlDB, opts)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer closeWithin(b.close, 5*time.Second, log)
	leasedStore, closeLeased, err := openLeased(ctx, b, o.redisDB)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer closeLeased()
	cfg := &transfers.Config{Logger: log, BodyTimeout: o.bodyTimeout, RequestTimeout: o.timeout, MaxConcurrent: o.maxConcurrent,
		WebhookSecrets: o.webhookSecrets, Events: o.publish != ""}
	reg, err := setupMetrics(cfg, b.pool)
	if err != nil {
		return err
	}
	tr, err := setupTracing(ctx, o.otlp, cfg, log)
	if err != nil {
		return err
	}
	defer tr.shutdown(log)
	if o.mode == "on" {
		if c.OwnsProcess {
			if limit := setMemoryLimit(o.cacheBytes); limit > 0 {
				log.Debug("idem serve: soft memory limit set (GOMEMLIMIT overrides it)", "bytes", limit)
			}
		}
		if cfg.Guard, err = idem.New(tr.store(b.store), &idem.Config{TTL: o.ttl, ReplayCacheBytes: o.cacheBytes}); err != nil {
			return err
		}
		if d, ok := b.store.(idem.ExpiredDeleter); ok {
			sw, err := idem.NewSweeper(d, &idem.SweeperConfig{Logger: log})
			if err != nil {
				return err
			}
			go sw.Run(ctx)
		}
		if o.leased.provider != "" {
			if err := o.leased.configure(cfg, leasedStore, o.ttl); err != nil {
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
	// For idem import, which stages the events of its rows when the
	// ledger's transfers are announced.
	if err := b.ledger.SetAnnounced(ctx, cfg.Events); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if cfg.Leased != nil {
		// Stopped, and waited for, before the store closes.
		m := newCompleterMetrics(reg, idemhttp.KindPrefix+transfers.PayoutKind)
		stop, err := startCompleter(ctx, cfg.Leased, o.completeInterval, o.leased.reportAfter, m, log)
		if err != nil {
			return err
		}
		defer stop()
		// Beside it, the scan of the payouts whose leased record was lost.
		defer startOrphanScan(ctx, svc, o.completeInterval, o.orphanAfter, newOrphanMetrics(reg), log)()
	}

	if o.publish != "" {
		// Stopped, and waited for, before the store closes.
		stop, err := startRelay(ctx, b.store, o.publish, eventsNamed(o.events), reg, log)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
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
			cons.wait(o.grace, log)
		}
	}()
	if o.source != nil {
		ib, err := inbox.New(b.store, &inbox.Config{Name: consumerName, TTL: o.consumeTTL, Logger: log, Observer: inboxMetrics(reg, consumerName)})
		if err != nil {
			return err
		}
		run, err := o.source(ctx, consumeParams{URL: o.consume, Queue: o.queue, Inbox: ib, Handler: svc.ApplyMessage, Logger: log})
		if err != nil {
			return fmt.Errorf("serve: -consume %s: %w", redactURL(o.consume), err)
		}
		log.Info("idem serve: consuming", "consume", redactURL(o.consume), "queue", o.queue, "inbox", ib.Scope())
		cons = startConsumer(consumeCtx, "idem serve", run, log)
	}

	stopAdmin, _, err := startAdmin(&o.admin, b.store, cfg.Guard, o.leased.reportAfter, o.ttl, log)
	if err != nil {
		return err
	}
	defer stopAdmin()
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var running atomic.Int64
	srv := &http.Server{
		Handler:           tr.handler(countRunning(svc, &running)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       o.idle,
	}
	attrs := []any{"addr", "http://" + ln.Addr().String(), "db", redact(o.db), "idempotency", o.mode}
	if o.redisDB != "" {
		attrs = append(attrs, "ledger", redact(o.sqlDB))
	}
	if cfg.Leased != nil {
		attrs = append(attrs, "provider", redactURL(o.leased.provider), "lease", o.leased.lease)
	}
	if b.pool != nil {
		attrs = append(attrs, "pool", b.pool.Config().MaxConns)
	}
	if n := len(o.webhookSecrets); n > 0 {
		attrs = append(attrs, "webhook_secrets", n)
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
		log.Error("idem serve: shutting down: the consumer stopped", "grace", o.grace)
	case <-ctx.Done():
		log.Info("idem serve: shutting down", "grace", o.grace)
	}
	// Stop consuming and serving together; the store closes only once
	// both are done, so that no message is processed on a closed store.
	stopConsuming()
	err = shutdown(context.WithoutCancel(ctx), srv, errc, &running, o.grace, log)
	return errors.Join(failed, err)
}

// parseCacheSize parses -replay-cache: a number of bytes, with an optional
// KiB, MiB or GiB suffix, into idem.Config.ReplayCacheBytes, where 0 is
// -1 (off).
func parseCacheSize(s string) (int64, error) {
	const must = "must be a size in bytes with an optional KiB, MiB or GiB suffix (such as 32MiB), or 0 to turn the cache off"
	num, shift := s, 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	if num == "" || strings.TrimLeft(num, "0123456789") != "" {
		return 0, errors.New(must)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64>>shift {
		return 0, errors.New("is too large")
	}
	if n == 0 {
		return -1, nil
	}
	return n << shift, nil
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
