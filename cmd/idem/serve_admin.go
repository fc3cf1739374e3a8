package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/console"
)

// adminOptions are idem serve's flags of the console (-admin).
type adminOptions struct {
	addr, token, tlsCert, tlsKey string
}

func (o *adminOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "admin", "", "serve the operators' console on this address (such as 127.0.0.1:9090); off when empty. A non-loopback address needs -admin-tls-cert and -admin-tls-key")
	fs.StringVar(&o.token, "admin-token", "", "with -admin: the token every console request must carry (required)")
	fs.StringVar(&o.tlsCert, "admin-tls-cert", "", "with -admin: the console's TLS certificate (PEM file)")
	fs.StringVar(&o.tlsKey, "admin-tls-key", "", "with -admin: the console's TLS key (PEM file)")
}

func (o *adminOptions) validate() error {
	if o.addr == "" {
		if o.token != "" || o.tlsCert != "" || o.tlsKey != "" {
			return usageError{"serve: -admin-token, -admin-tls-cert and -admin-tls-key apply only with -admin ADDRESS"}
		}
		return nil
	}
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return usageError{fmt.Sprintf("serve: -admin must be host:port, got %q: %v", o.addr, err)}
	}
	switch {
	case o.token == "":
		return usageError{"serve: -admin needs -admin-token: every console request must carry it"}
	case len(o.token) < 16:
		return usageError{"serve: -admin-token must be at least 16 characters"}
	case (o.tlsCert == "") != (o.tlsKey == ""):
		return usageError{"serve: give both -admin-tls-cert and -admin-tls-key, or neither"}
	case o.tlsCert == "" && !loopback(host):
		return usageError{fmt.Sprintf("serve: -admin %s is not a loopback address: the console and its token would cross the network in clear; give -admin-tls-cert and -admin-tls-key, or listen on 127.0.0.1", o.addr)}
	}
	return nil
}

// loopback reports whether host names only the loopback interface; ""
// (every interface) does not.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// startAdmin serves the console of store, if -admin is set, and returns
// what stops it.
// guard, when set, is the Guard serving store: the console forgets
// through it (Guard.Forget), so that its replay cache drops the record.
func startAdmin(o *adminOptions, store idem.Store, guard *idem.Guard, reportAfter, ttl time.Duration, log *slog.Logger) (stop func(), addr string, err error) {
	if o.addr == "" {
		return func() {}, "", nil
	}
	a, ok := store.(idem.Admin)
	in, ok2 := store.(idem.Inspector)
	if !ok || !ok2 {
		return nil, "", fmt.Errorf("serve: -admin: this store (%T) does not implement idem.Admin", store)
	}
	h, err := console.New(console.Config{Token: o.token, Ops: &consoleOps{s: &adminStore{admin: a, insp: in, guard: guard}, reportAfter: reportAfter, ttl: ttl},
		Logger: log, Secure: o.tlsCert != ""})
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, "", fmt.Errorf("serve: -admin: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	scheme := "http"
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			ln.Close()
			return nil, "", fmt.Errorf("serve: -admin-tls-cert/-admin-tls-key: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln, scheme = tls.NewListener(ln, srv.TLSConfig), "https"
	}
	addr = scheme + "://" + ln.Addr().String()
	log.Info("idem serve: console listening", "admin", addr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("idem serve: console stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, addr, nil
}

// consoleOps is console.Ops on an adminStore.
type consoleOps struct {
	s           *adminStore
	reportAfter time.Duration
	ttl         time.Duration
}

const (
	// consoleCountCap bounds the records a page load counts.
	consoleCountCap = 100_000
	// consolePendingCap bounds the pending records the page shows.
	consolePendingCap = 200
	// consoleRecent is how many recent outcomes and audit entries it shows.
	consoleRecent = 15
)

func pageRecord(r *idem.Record, now time.Time) console.Record {
	until := r.ExpiresAt
	if r.State == idem.StatePending {
		until = r.LeaseUntil
	}
	return console.Record{Scope: r.Scope, Key: r.Key, State: recordState(r, now), Kind: r.Kind, Token: r.Token,
		Status: r.Result.Status, Attempts: r.Attempts, Created: r.CreatedAt, Until: until, LastError: r.LastError}
}

func (c *consoleOps) Summary(ctx context.Context) (*console.Summary, error) {
	now := time.Now()
	s := &console.Summary{Now: now}
	var recent []*idem.Record
	p := &idem.ListParams{Now: now, Limit: adminPage}
	for s.Counted < consoleCountCap {
		page, err := c.s.admin.List(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Records {
			s.Counted++
			switch {
			case r.State == idem.StatePending && isStuck(r, now, c.reportAfter):
				s.Stuck++
			case r.State == idem.StatePending:
				s.InFlight++
			case r.Expired(now):
				s.Expired++
			default:
				s.Completed++
				recent = append(recent, r)
				if len(recent) > 4*consoleRecent {
					recent = newest(recent, consoleRecent)
				}
			}
		}
		if page.Next == "" {
			break
		}
		s.Capped = s.Counted >= consoleCountCap
		p.Cursor = page.Next
	}
	for _, r := range newest(recent, consoleRecent) {
		s.Recent = append(s.Recent, pageRecord(r, now))
	}
	err := eachPending(ctx, c.s.admin, now, c.reportAfter, false, func(pr pendingRecord) error {
		if len(s.Pending) >= consolePendingCap {
			return nil
		}
		rec := pageRecord(pr.rec, now)
		rec.Stuck = pr.stuck
		for _, st := range pr.steps {
			rec.Steps = append(rec.Steps, console.Step{Name: st.Name, Output: string(st.Output)})
		}
		s.Pending = append(s.Pending, rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(s.Pending, func(a, b console.Record) int {
		switch {
		case a.Stuck == b.Stuck:
			return a.Created.Compare(b.Created)
		case a.Stuck:
			return -1
		}
		return 1
	})
	audit, err := c.s.admin.Audit(ctx, &idem.AuditParams{Limit: consoleRecent})
	if err != nil {
		return nil, err
	}
	for _, e := range audit.Entries {
		was := "-"
		if e.Before != nil {
			was = fmt.Sprintf("%s, status %d, %d attempt(s)", recordState(e.Before, e.At), e.Before.Result.Status, e.Before.Attempts)
			if e.Before.LastError != "" {
				was += ", last error: " + e.Before.LastError
			}
		}
		s.Audit = append(s.Audit, console.AuditEntry{ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, Scope: e.Scope, Key: e.Key,
			Reason: e.Reason, Was: was, Status: e.Status})
	}
	return s, nil
}

// newest returns the n records of rs created last, newest first.
func newest(rs []*idem.Record, n int) []*idem.Record {
	slices.SortFunc(rs, func(a, b *idem.Record) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return rs[:min(n, len(rs))]
}

func (c *consoleOps) Forget(ctx context.Context, a console.Action) error {
	_, err := forget(ctx, c.s, change{scope: a.Scope, key: a.Key, token: a.Token, force: a.Force, actor: a.Actor, reason: a.Reason}, time.Now())
	return refusalHint(err)
}

func (c *consoleOps) Resolve(ctx context.Context, a console.Action) error {
	ch := change{scope: a.Scope, key: a.Key, token: a.Token, actor: a.Actor, reason: a.Reason, abandon: a.Abandon, defaultTTL: c.ttl}
	if !a.Abandon {
		res := answerResult(a.Status, a.Body)
		ch.answer = &res
	}
	_, _, err := resolve(ctx, c.s, ch, time.Now())
	return refusalHint(err)
}
