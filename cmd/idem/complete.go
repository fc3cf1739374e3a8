package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

const completeSynopsis = `complete [-db idem.db | postgres://… | redis://… -ledger idem.db | postgres://…] -provider URL [-lease 30s] [-provider-timeout 2s] [-ttl 24h] [-report-after 15m]

complete makes one pass of the completer, then exits: it finds the payouts
(leased work) whose lease has ended without an answer, because their process
died or their client gave up on a 503, and drives each one on from its last
recovery point, calling the provider at -provider with the same derived key
(see docs/PAYOUTS.md). It prints what it did. Its exit status is 1 when the
store failed. On SQLite it cannot run beside the idem serve of the same file;
idem serve -provider runs the completer itself. With the payouts' records on
Redis, give the -db and -ledger of idem serve.`

type completeCommand struct {
	*Main
}

func (c *completeCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("complete", flag.ContinueOnError)
	db := fs.String("db", defaultDB, "SQLite file path, or a postgres:// URL; or the redis:// URL of idem serve's payouts, with -ledger")
	ledger := fs.String("ledger", "", "with a redis:// -db: the SQL database of the ledger (idem serve's -ledger); defaults to "+defaultDB)
	lf := leasedFlags(fs)
	ttl := fs.Duration("ttl", idem.DefaultTTL, "how long a finished payout's answer is kept and replayed")
	if err := c.parse(fs, args, completeSynopsis); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("complete: unexpected argument %q (run \"idem complete -h\")", fs.Arg(0))}
	}
	if *lf.provider == "" {
		return usageError{"complete: -provider is required: the completer calls the provider to finish payouts"}
	}
	if err := lf.validate("complete", *ttl); err != nil {
		return err
	}
	sqlDB, redisDB, err := ledgerDB("complete", *db, *ledger)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	b, err := openBackend(ctx, sqlDB, backendOptions{existing: true})
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	defer b.close()
	ls, closeLeased, err := openLeased(ctx, b, redisDB)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	defer closeLeased()
	cfg := &transfers.Config{Logger: log}
	if cfg.Guard, err = idem.New(b.store, &idem.Config{TTL: *ttl}); err != nil {
		return err
	}
	if err := lf.configure(cfg, ls, *ttl); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	// The service registers the payout work with cfg.Leased: the
	// completer runs it.
	if _, err := transfers.New(ctx, b.ledger, cfg); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	comp, err := idem.NewCompleter(cfg.Leased, &idem.CompleterConfig{Logger: log, ReportAfter: *lf.reportAfter})
	if err != nil {
		return err
	}
	rep, err := comp.RunOnce(ctx)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	fmt.Fprintf(c.Stdout, "found %d abandoned record(s): %d completed, %d failed (retried later), %d skipped (taken by another process), %d of an unknown kind, %d store failure(s); %d pending past -report-after (need a human)\n",
		rep.Found, rep.Completed, rep.Failed, rep.Skipped, rep.UnknownKind, rep.Unavailable, rep.Stuck)
	if rep.Unavailable > 0 {
		return fmt.Errorf("complete: the store failed on %d record(s)", rep.Unavailable)
	}
	return nil
}

// leasedOptions are the flags of leased mode that idem serve and idem
// complete share.
type leasedOptions struct {
	provider        *string
	lease           *time.Duration
	providerTimeout *time.Duration
	reportAfter     *time.Duration
}

func leasedFlags(fs *flag.FlagSet) leasedOptions {
	return leasedOptions{
		provider:        fs.String("provider", "", "base URL of the payment provider that payouts charge (POST {URL}/charges); enables POST /payouts"),
		lease:           fs.Duration("lease", 30*time.Second, "with -provider: how long a payout's claim holds its key without a heartbeat; a crashed process's payouts are taken over this long after"),
		providerTimeout: fs.Duration("provider-timeout", transfers.DefaultProviderTimeout, "with -provider: the bound of each call to the provider"),
		reportAfter:     fs.Duration("report-after", 15*time.Minute, "with -provider: how long a payout may stay pending before the completer reports it as needing a human (an ERROR log line, a metric); it keeps trying it"),
	}
}

// validate checks the flags' values; cmd names the command in errors.
func (o leasedOptions) validate(cmd string, ttl time.Duration) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"lease", *o.lease}, {"provider-timeout", *o.providerTimeout}, {"report-after", *o.reportAfter}, {"ttl", ttl}} {
		if d.v <= 0 {
			return usageError{fmt.Sprintf("%s: -%s must be positive, got %s", cmd, d.name, d.v)}
		}
	}
	if *o.lease < time.Second {
		// Heartbeats go every third of the lease: a shorter one would
		// have the database written to all the time.
		return usageError{fmt.Sprintf("%s: -lease must be at least 1s, got %s", cmd, *o.lease)}
	}
	u, err := url.Parse(*o.provider)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("%s: -provider must be an http:// or https:// URL, got %q", cmd, *o.provider)}
	}
	return nil
}

// openLeased returns the store of the payouts' leased records: the Redis
// server of redisDB, or, when it is empty, b's own store, whose local steps
// commit with the ledger. closeLeased closes what it opened.
func openLeased(ctx context.Context, b *backend, redisDB string) (ls idem.LeasedStore, closeLeased func(), err error) {
	if redisDB != "" {
		s, err := openRedis(ctx, redisDB)
		if err != nil {
			return nil, nil, err
		}
		return s, func() { _ = s.Close() }, nil
	}
	tx, ok := b.store.(idem.LeasedTxStore)
	if !ok {
		return nil, func() {}, nil // configure refuses it, with -provider only
	}
	return tx, func() {}, nil
}

// configure sets cfg's leased mode over store.
func (o leasedOptions) configure(cfg *transfers.Config, ls idem.LeasedStore, ttl time.Duration) error {
	if ls == nil {
		return errors.New("-provider: this store has no leased mode with local transactions (idem.LeasedTxStore)")
	}
	l, err := idem.NewLeased(ls, &idem.LeasedConfig{Lease: *o.lease, TTL: ttl})
	if err != nil {
		return err
	}
	cfg.Leased, cfg.Provider, cfg.ProviderTimeout = l, *o.provider, *o.providerTimeout
	return nil
}

// runCompleter runs a completer pass every interval, the first one
// interval after the start, until ctx is done, counting what each pass did
// in m. (Waiting first leaves the payouts a process left pending to their
// clients' retries for a while after a restart.)
func runCompleter(ctx context.Context, c *idem.Completer, interval time.Duration, m *completerMetrics, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := c.RunOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("idem serve: completer pass failed", "err", err)
			m.pass(false)
		case err == nil:
			m.pass(true)
		}
	}
}

// startCompleter runs the completer of l in the background and returns a
// function that stops it and waits for its pass to end.
func startCompleter(ctx context.Context, l *idem.Leased, interval, reportAfter time.Duration, m *completerMetrics, log *slog.Logger) (stop func(), err error) {
	c, err := idem.NewCompleter(l, &idem.CompleterConfig{ReportAfter: reportAfter, Logger: log, Observe: m.observe})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runCompleter(ctx, c, interval, m, log)
	}()
	return func() { cancel(); <-done }, nil
}
