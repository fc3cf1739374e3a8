package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

// leasedOptions are the flags of leased mode that idem serve and idem
// complete share.
type leasedOptions struct {
	provider        string
	lease           time.Duration
	providerTimeout time.Duration
	reportAfter     time.Duration
}

// flags defines the leased-mode flags on fs.
func (o *leasedOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.provider, "provider", "", "base URL of the payment provider that payouts charge (POST {URL}/charges); enables POST /payouts")
	fs.DurationVar(&o.lease, "lease", 30*time.Second, "with -provider: how long a payout's claim holds its key without a heartbeat; a crashed process's payouts are taken over this long after")
	fs.DurationVar(&o.providerTimeout, "provider-timeout", transfers.DefaultProviderTimeout, "with -provider: the bound of each call to the provider")
	fs.DurationVar(&o.reportAfter, "report-after", 15*time.Minute, "with -provider: how long a payout may stay pending before the completer reports it as needing a human (an ERROR log line, a metric); it keeps trying it")
}

// validate checks the flags' values; cmd names the command in errors.
func (o *leasedOptions) validate(cmd string, ttl time.Duration) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"lease", o.lease}, {"provider-timeout", o.providerTimeout}, {"report-after", o.reportAfter}, {"ttl", ttl}} {
		if d.v <= 0 {
			return usageError{fmt.Sprintf("%s: -%s must be positive, got %s", cmd, d.name, d.v)}
		}
	}
	if o.lease < time.Second {
		// Heartbeats go every third of the lease: a shorter one would
		// have the database written to all the time.
		return usageError{fmt.Sprintf("%s: -lease must be at least 1s, got %s", cmd, o.lease)}
	}
	u, err := url.Parse(o.provider)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("%s: -provider must be an http:// or https:// URL, got %q", cmd, o.provider)}
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
func (o *leasedOptions) configure(cfg *transfers.Config, ls idem.LeasedStore, ttl time.Duration) error {
	if ls == nil {
		return errors.New("-provider: this store has no leased mode with local transactions (idem.LeasedTxStore)")
	}
	l, err := idem.NewLeased(ls, &idem.LeasedConfig{Lease: o.lease, TTL: ttl})
	if err != nil {
		return err
	}
	cfg.Leased, cfg.Provider, cfg.ProviderTimeout, cfg.KeyTTL = l, o.provider, o.providerTimeout, ttl
	return nil
}
