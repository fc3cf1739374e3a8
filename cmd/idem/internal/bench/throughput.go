package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// Accounts of the overhead and replay scenarios: transfers of 1 cent go
// around them, and balances so large that no transfer is ever declined.
const (
	numAccounts    = 8
	initialBalance = int64(1) << 50
)

func accountID(i int) string { return "bench-" + strconv.Itoa(i) }

// transferBody is the n-th transfer: 1 cent between two of the accounts,
// spread so that concurrent transfers rarely lock the same pair.
func transferBody(n int64) []byte {
	from := int(n % numAccounts)
	to := (from + 1 + int(n/numAccounts)%(numAccounts-1)) % numAccounts
	return fmt.Appendf(nil, `{"from":%q,"to":%q,"amount":1}`, accountID(from), accountID(to))
}

// completed is a key whose first execution answered 201, with its request
// and answer, for the replays to repeat and compare.
type completed struct {
	key        string
	body, resp []byte
}

// keys hands out fresh keys and remembers the completed ones.
type keys struct {
	prefix string
	next   atomic.Int64

	mu   sync.RWMutex
	done []completed
	turn atomic.Int64
}

func (k *keys) fresh() (key string, n int64) {
	n = k.next.Add(1)
	return k.prefix + strconv.FormatInt(n, 36), n
}

func (k *keys) complete(c completed) {
	k.mu.Lock()
	k.done = append(k.done, c)
	k.mu.Unlock()
}

// pick returns the completed keys in turn; false when there are none.
func (k *keys) pick() (completed, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if len(k.done) == 0 {
		return completed{}, false
	}
	return k.done[int(k.turn.Add(1)%int64(len(k.done)))], true
}

// transferOp returns an op that POSTs a new transfer with a fresh key to
// base. When keep is set, it remembers the completed keys for replays.
func (r *runner) transferOp(base string, ks *keys, keep bool) op {
	url := base + "/transfers"
	return func(ctx context.Context) (string, bool) {
		key, n := ks.fresh()
		body := transferBody(n)
		a, err := r.client.do(ctx, http.MethodPost, url, key, body)
		if err != nil {
			return transportError(ctx), false
		}
		if a.status != http.StatusCreated || a.replayed {
			return a.label(), false
		}
		r.created.Add(1)
		if keep {
			ks.complete(completed{key: key, body: body, resp: a.body})
		}
		return a.label(), true
	}
}

// replayOp returns an op that retries a completed key with its original
// request, and checks that the answer is the original one replayed.
func (r *runner) replayOp(base string, ks *keys) op {
	url := base + "/transfers"
	return func(ctx context.Context) (string, bool) {
		c, ok := ks.pick()
		if !ok {
			return "no completed key", false
		}
		a, err := r.client.do(ctx, http.MethodPost, url, c.key, c.body)
		if err != nil {
			return transportError(ctx), false
		}
		switch {
		case a.status == http.StatusCreated && !a.replayed:
			r.created.Add(1)
			r.problem("replay: key %q was executed again instead of replayed", c.key)
			return "201 executed again", false
		case !a.replayed:
			return a.label(), false
		case a.status != http.StatusCreated || !bytes.Equal(a.body, c.resp):
			r.problem("replay: key %q replayed %d %q, first answered 201 %q", c.key, a.status, a.body, c.resp)
			return a.label() + " (differs)", false
		}
		return a.label(), true
	}
}

func transportError(ctx context.Context) string {
	if ctx.Err() != nil {
		return "cancelled"
	}
	return "transport error"
}

// compare measures the variants a and b at concurrency c: one unmeasured
// round of each, then rounds in the order A B B A A B B A …, so that a
// drift on the machine weighs on both alike.
func (r *runner) compare(ctx context.Context, c int, a, b *tally, doA, doB op) error {
	for _, v := range []struct {
		t  *tally
		do op
	}{{a, doA}, {b, doB}} {
		if err := round(ctx, v.t, c, r.warmTime(), false, v.do); err != nil {
			return err
		}
	}
	for i := range r.cfg.Rounds {
		first, second := a, b
		doFirst, doSecond := doA, doB
		if i%2 == 1 {
			first, second, doFirst, doSecond = b, a, doB, doA
		}
		if err := round(ctx, first, c, r.roundTime(), true, doFirst); err != nil {
			return err
		}
		if err := round(ctx, second, c, r.roundTime(), true, doSecond); err != nil {
			return err
		}
	}
	return nil
}

// overhead measures POST /transfers with idem (a fresh key per request)
// against the same service without idempotency.
func (r *runner) overhead(ctx context.Context, rep *Report) error {
	for _, c := range r.cfg.Concurrency {
		ks := &keys{prefix: r.runID + "-o" + strconv.Itoa(c) + "-"}
		plain, withIdem := newTally("plain"), newTally("idem")
		err := r.compare(ctx, c, plain, withIdem,
			r.transferOp(r.plain.URL, ks, false),
			r.transferOp(r.idem.URL, ks, false))
		if err != nil {
			return err
		}
		cmp := Comparison{Scenario: "overhead", Concurrency: c, Base: plain.variant(), Subject: withIdem.variant()}
		cmp.Ratio = ratio(cmp.Subject.ReqPerSec, cmp.Base.ReqPerSec)
		pg := r.b.kind == "postgres" || r.b.kind == "mysql"
		var note string
		// The bar is set at 8 and at 32 clients (docs/DESIGN.md#bars):
		// from 8 on, it applies.
		switch {
		case !pg:
			note = "PostgreSQL and MySQL, 8 and 32 clients"
		case c < 8:
			note = "8 and 32 clients"
		}
		cmp.Bar = newBar(">=", 0.90, cmp.Ratio, pg && c >= 8, note)
		rep.Overhead = append(rep.Overhead, cmp)
		r.progress("overhead c=%d: plain %.0f req/s, idem %.0f req/s: %.2f× (%s)",
			c, cmp.Base.ReqPerSec, cmp.Subject.ReqPerSec, cmp.Ratio, cmp.Bar.Verdict())
	}
	return nil
}

// replay measures retries of completed keys against first executions:
// through the service as it runs (replays from the Guard's cache), then
// through the service whose Guard has its shortcuts off (replays from the
// store).
func (r *runner) replay(ctx context.Context, rep *Report) error {
	for _, v := range []struct {
		scenario, name, url string
		applies             bool
		note                string
		out                 *[]Comparison
	}{
		{"replay", "replay (cache)", r.idem.URL, true, "", &rep.Replay},
		{"replay-store", "replay (store)", r.storeOnly.URL, false, "cache off", &rep.ReplayStore},
	} {
		for _, c := range r.cfg.Concurrency {
			ks := &keys{prefix: r.runID + "-" + v.scenario + strconv.Itoa(c) + "-"}
			first, again := newTally("first execution"), newTally(v.name)
			err := r.compare(ctx, c, first, again,
				r.transferOp(v.url, ks, true),
				r.replayOp(v.url, ks))
			if err != nil {
				return err
			}
			cmp := Comparison{Scenario: v.scenario, Concurrency: c, Base: first.variant(), Subject: again.variant()}
			cmp.Ratio = ratio(cmp.Subject.ReqPerSec, cmp.Base.ReqPerSec)
			cmp.Bar = newBar(">=", 5, cmp.Ratio, v.applies, v.note)
			*v.out = append(*v.out, cmp)
			r.progress("%s c=%d: first %.0f req/s, replay %.0f req/s: %.2f× (%s)",
				v.scenario, c, cmp.Base.ReqPerSec, cmp.Subject.ReqPerSec, cmp.Ratio, cmp.Bar.Verdict())
		}
	}
	return nil
}
