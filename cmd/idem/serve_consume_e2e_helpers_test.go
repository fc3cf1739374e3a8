package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

// The helpers of the idem serve -consume end-to-end tests
// (serve_consume_e2e_test.go): a plan of transfer commands, a broker seen from
// the test, and the audit of GET /transfers.

// e2eTimeout bounds every wait of these tests, generously: the machine is
// shared and loaded.
const e2eTimeout = 120 * time.Second

// e2eInitial is every account's opening balance: large enough that no
// accepted command can fail for want of funds, whatever the order the
// consumers apply them in, so that the final balances are known.
const e2eInitial = 1_000_000

// e2eCommand is one transfer command: a message id and a body.
type e2eCommand struct {
	id       string
	body     []byte
	from, to string
	amount   int64
	accepted bool // applied when delivered; else refused: settled, no transfer
	kind     string
}

// e2ePublish is one publish of a plan: a command, for the first time or
// again.
type e2ePublish struct {
	cmd  *e2eCommand
	dup  bool // a copy: the command was published before
	late bool // a copy published in a later segment than the first
}

// e2ePlan is what a run publishes: the accounts, the commands, and the
// publishes in segments, which the run interleaves with its kills.
type e2ePlan struct {
	seed     uint64
	accounts []string
	cmds     []*e2eCommand
	segments [][]e2ePublish
}

// e2eSeed returns the seed of a plan: IDEM_E2E_SEED when set (to replay a
// failed run), else a fresh one. Every test logs its seed.
func e2eSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("IDEM_E2E_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("IDEM_E2E_SEED: %v", err)
		}
		return n
	}
	return rand.Uint64()
}

// e2eRefusals are the commands that can never take effect, whatever the
// order: each is settled (acknowledged, no transfer, not delivered again).
var e2eRefusals = []struct {
	kind string
	body string
}{
	{"unknown-account", `{"from":"acct-0","to":"ghost","amount":5}`},
	{"unknown-account", `{"from":"ghost","to":"acct-1","amount":5}`},
	{"insufficient-funds", `{"from":"acct-1","to":"acct-2","amount":1000000000000}`}, // more than all the money there is
	{"malformed-json", `not json`},
	{"malformed-json", `{"from":"acct-0","to":"acct-1"`},
	{"malformed-json", `{"from":"acct-0","to":"acct-1","amount":"5"}`},
	{"invalid-account-id", `{"from":"no such","to":"acct-1","amount":5}`},
	{"invalid-amount", `{"from":"acct-0","to":"acct-1","amount":0}`},
	{"same-account", `{"from":"acct-2","to":"acct-2","amount":5}`},
}

// newE2EPlan makes a plan of accepted commands between nAccounts
// accounts, refused commands of every kind of e2eRefusals, spread over
// nSegments segments. About one command in ten is published twice in a
// row, and in every segment after the first about one earlier command in
// eight is published again.
func newE2EPlan(seed uint64, nAccounts, accepted, refused, nSegments int) *e2ePlan {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := &e2ePlan{seed: seed}
	for i := range nAccounts {
		p.accounts = append(p.accounts, fmt.Sprintf("acct-%d", i))
	}
	for i := range accepted {
		from := r.IntN(nAccounts)
		to := (from + 1 + r.IntN(nAccounts-1)) % nAccounts
		c := &e2eCommand{
			id:   fmt.Sprintf("cmd-%04d", i),
			from: p.accounts[from], to: p.accounts[to], amount: 1 + r.Int64N(1000),
			accepted: true, kind: "transfer",
		}
		c.body, _ = json.Marshal(map[string]any{"from": c.from, "to": c.to, "amount": c.amount})
		p.cmds = append(p.cmds, c)
	}
	// Refused commands at random places among the accepted ones.
	for i := range refused {
		rf := e2eRefusals[i%len(e2eRefusals)]
		c := &e2eCommand{id: fmt.Sprintf("bad-%04d", i), body: []byte(rf.body), kind: rf.kind}
		at := r.IntN(len(p.cmds) + 1)
		p.cmds = append(p.cmds[:at], append([]*e2eCommand{c}, p.cmds[at:]...)...)
	}
	var published []*e2eCommand
	per := (len(p.cmds) + nSegments - 1) / nSegments
	for s := range nSegments {
		var seg []e2ePublish
		lo, hi := s*per, min((s+1)*per, len(p.cmds))
		for _, c := range p.cmds[lo:hi] {
			seg = append(seg, e2ePublish{cmd: c})
			if r.IntN(10) == 0 {
				seg = append(seg, e2ePublish{cmd: c, dup: true})
			}
		}
		if s > 0 {
			for range len(published) / 8 {
				seg = append(seg, e2ePublish{cmd: published[r.IntN(len(published))], dup: true, late: true})
			}
		}
		published = append(published, p.cmds[lo:hi]...)
		p.segments = append(p.segments, seg)
	}
	return p
}

// e2eBroker is the broker of a run, as the test sees it.
type e2eBroker struct {
	url   string // -consume
	queue string // -consume-queue
	// publish publishes a command once (retrying until the broker has it);
	// stored is false when the broker dropped it as a duplicate itself.
	publish func(ctx context.Context, id string, body []byte) (stored bool, err error)
	// exists reports whether the stream or queue exists.
	exists func(ctx context.Context) (bool, error)
	// pending counts the messages not yet acknowledged: for NATS those
	// not delivered and those delivered and not acknowledged; for AMQP
	// those ready (unacknowledged ones show only once their consumer's
	// connection is closed).
	pending func(ctx context.Context) (int, error)
	// final, when set, checks the broker once the last server, whose log
	// is log, has stopped.
	final func(t *testing.T, log string)
	// prepare, when set, runs once the first server has started.
	prepare func(t *testing.T)
	// lateWindow, when set, is the broker's own duplicate window: a late
	// copy is published only once that much time has passed since the
	// previous segment, so that it reaches the consumer's inbox.
	lateWindow time.Duration
}

// e2eRun is a run of idem serve -consume against a broker: the current
// server process, and what was published.
type e2eRun struct {
	t      *testing.T
	b      *e2eBroker
	args   []string
	s      *server
	starts int

	lastSegment  time.Time     // when the previous segment's publishing ended
	lateStored   int           // late copies the broker stored (not dropped)
	lateDropped  int           // late copies the broker dropped as duplicates
	dupStored    int           // every copy the broker stored
	killedMidway int           // kills after which messages were still to be acknowledged
	publishing   chan struct{} // closed once publishAsync's segment is published
}

// start starts idem serve and checks, right after /healthz answers, that
// the stream or queue exists.
func (r *e2eRun) start() {
	t := r.t
	t.Helper()
	r.s = startServe(t, r.args...)
	r.starts++
	healthy := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ok, err := r.b.exists(ctx)
		if ok {
			break
		}
		// "Within a few seconds" of /healthz; the server declares it
		// before it listens, so it is there at once.
		if time.Since(healthy) > 3*time.Second {
			t.Fatalf("start %d: the stream or queue %s does not exist %s after /healthz answered (last error: %v)\n%s",
				r.starts, r.b.queue, time.Since(healthy).Round(time.Millisecond), err, r.s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(healthy); d > 500*time.Millisecond {
		t.Logf("start %d: the stream or queue appeared %s after /healthz", r.starts, d.Round(time.Millisecond))
	}
}

// publishSegment publishes a segment of the plan.
func (r *e2eRun) publishSegment(seg []e2ePublish) {
	r.t.Helper()
	if err := r.publish(seg); err != nil {
		r.t.Fatal(err)
	}
}

// publishAsync publishes a segment of the plan in the background; wait
// waits until it is published, failing the test if it could not be.
func (r *e2eRun) publishAsync(seg []e2ePublish) (wait func()) {
	done := make(chan error, 1)
	finished := make(chan struct{})
	r.publishing = finished
	go func() {
		err := r.publish(seg)
		close(finished)
		done <- err
	}()
	return func() {
		r.t.Helper()
		if err := <-done; err != nil {
			r.t.Fatal(err)
		}
	}
}

// publish publishes seg. It runs on any goroutine, but only one at a time.
func (r *e2eRun) publish(seg []e2ePublish) error {
	if w := r.b.lateWindow; w > 0 && !r.lastSegment.IsZero() {
		if wait := time.Until(r.lastSegment.Add(w + w/2)); wait > 0 {
			time.Sleep(wait) // past the broker's own duplicate window
		}
	}
	for _, p := range seg {
		ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
		stored, err := r.b.publish(ctx, p.cmd.id, p.cmd.body)
		cancel()
		if err != nil {
			return fmt.Errorf("publish %s: %w", p.cmd.id, err)
		}
		switch {
		case !p.dup:
			if !stored {
				return fmt.Errorf("the broker dropped the first publish of %s as a duplicate", p.cmd.id)
			}
		case p.late && stored:
			r.lateStored++
		case p.late:
			r.lateDropped++
		}
		if p.dup && stored {
			r.dupStored++
		}
	}
	r.lastSegment = time.Now()
	return nil
}

// inboxCounts returns the current server's idem_inbox_messages_total by
// outcome.
func (r *e2eRun) inboxCounts() map[string]int {
	r.t.Helper()
	status, body := r.s.do(r.t, "GET", "/metrics", "", "")
	if status != 200 {
		r.t.Fatalf("GET /metrics: %d", status)
	}
	return parseInboxMetrics(body)
}

var inboxMetricRE = regexp.MustCompile(`(?m)^idem_inbox_messages_total\{consumer="transfers",outcome="(\w+)"\} (\d+)$`)

func parseInboxMetrics(body string) map[string]int {
	n := map[string]int{}
	for _, m := range inboxMetricRE.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.Atoi(m[2])
		n[m[1]] = v
	}
	return n
}

// processed returns how many messages the current server has processed.
func (r *e2eRun) processed() int {
	r.t.Helper()
	total := 0
	for _, v := range r.inboxCounts() {
		total += v
	}
	return total
}

// waitConsuming waits until the current server has processed at least n
// messages.
// waitBacklog waits, while publishAsync's segment is still being
// published, until the broker holds messages the server has not
// acknowledged: a server that keeps up with a slow publisher (a loaded
// machine slows the test's publishing more than the server) would be
// killed idle, with nothing left for the next one.
func (r *e2eRun) waitBacklog() {
	for {
		select {
		case <-r.publishing:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := r.b.pending(ctx)
		cancel()
		if err == nil && n > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *e2eRun) waitConsuming(n int) {
	t := r.t
	t.Helper()
	deadline := time.Now().Add(e2eTimeout)
	for {
		total := r.processed()
		if total >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server processed %d messages in %s, want %d\n%s", total, e2eTimeout, n, r.s.stderr)
		}
		select {
		case err := <-r.s.exited:
			t.Fatalf("idem serve exited on its own: %v\n%s", err, r.s.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitApplied waits until the ledger holds at least n transfers, the
// current server running all along.
func (r *e2eRun) waitApplied(n int) {
	t := r.t
	t.Helper()
	deadline := time.Now().Add(e2eTimeout)
	for {
		got := r.s.transferCount(t)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transfers after %s, want %d\n%s", got, e2eTimeout, n, r.s.stderr)
		}
		select {
		case err := <-r.s.exited:
			t.Fatalf("idem serve exited on its own: %v\n%s", err, r.s.stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill kills the current server with SIGKILL, checks that it was running
// until then, and notes whether messages were still to be acknowledged.
func (r *e2eRun) kill() {
	t := r.t
	t.Helper()
	e2eKill(t, r.s)
	// The broker gives the killed consumer's unacknowledged messages back
	// once it notices the connection is gone, which on a loaded machine
	// can take a moment: look for up to 3 s before calling the kill clean.
	var n int
	var err error
	for deadline := time.Now().Add(3 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err = r.b.pending(ctx)
		cancel()
		if (err == nil && n > 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err == nil && n > 0 {
		r.killedMidway++
		t.Logf("kill %d: %d messages still to be acknowledged", r.starts, n)
	} else {
		t.Logf("kill %d: pending %d, %v", r.starts, n, err)
	}
}

// e2eKill kills s with SIGKILL and waits for its end; it fails the test if
// s had exited before.
func e2eKill(t *testing.T, s *server) {
	t.Helper()
	select {
	case err := <-s.exited:
		t.Fatalf("idem serve had exited on its own before the kill: %v\n%s", err, s.stderr)
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		ee, ok := errors.AsType[*exec.ExitError](err)
		if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("idem serve ended with %v, not by the SIGKILL\n%s", err, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("idem serve still running 30 s after SIGKILL")
	}
}

// waitDrained waits until the broker holds nothing unacknowledged and the
// ledger holds want transfers, then for a quiet period in which neither
// changes.
func (r *e2eRun) waitDrained(want int) {
	t := r.t
	t.Helper()
	deadline := time.Now().Add(e2eTimeout)
	check := func() (int, int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := r.b.pending(ctx)
		return n, r.s.transferCount(t), err
	}
	for {
		pending, count, err := check()
		if err == nil && pending == 0 && count >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained after %s: %d pending (%v), %d transfers, want 0 and %d\n%s", e2eTimeout, pending, err, count, want, r.s.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A quiet period: a message delivered late (a redelivery, or one
	// still held unacknowledged by the consumer) would show now.
	time.Sleep(2 * time.Second)
	if pending, count, err := check(); err != nil || pending != 0 || count != want {
		t.Errorf("after the quiet period: %d pending (%v), %d transfers; want 0 and %d", pending, err, count, want)
	}
}

// finish stops the last server with SIGTERM (exit 0) and checks that it
// left nothing unprocessed. A message it held when it stopped goes back to
// the broker: on RabbitMQ, a copy held back for a retry because its
// original was being applied at the same moment (unacknowledged messages
// do not show in the queue's count, so the quiet period cannot wait for
// it). A server started again then finds only duplicates.
func (r *e2eRun) finish(p *e2ePlan, viaHTTP []e2eHTTPTransfer, want int) {
	t := r.t
	t.Helper()
	for round := 1; ; round++ {
		if code, _ := r.s.stop(t); code != 0 {
			t.Errorf("idem serve exited %d after SIGTERM, want 0\n%s", code, r.s.stderr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		left, err := r.b.pending(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after the stop: %v", err)
		}
		if left == 0 {
			break
		}
		if round == 3 {
			t.Errorf("%d messages still to be acknowledged after %d servers drained the queue", left, round)
			break
		}
		t.Logf("%d messages went back to the broker when the server stopped; its retries and warnings:\n%s", left, e2eWarnings(r.s.stderr.String()))
		r.start()
		r.waitDrained(want)
		if got := r.inboxCounts(); got["applied"] != 0 || got["refused"] != 0 {
			t.Errorf("a server started after the drain applied or refused messages: %v; want only duplicates", got)
		}
		r.audit(p, viaHTTP)
	}
	if r.b.final != nil {
		r.b.final(t, r.s.stderr.String())
	}
}

// e2eHTTPTransfer is a transfer made over HTTP during a run.
type e2eHTTPTransfer struct {
	key, from, to string
	amount        int64
}

// post makes tr over HTTP on the current server and checks the answer: 201,
// and a replay when replay is set.
func (r *e2eRun) post(tr e2eHTTPTransfer, replay bool) {
	t := r.t
	t.Helper()
	body := fmt.Sprintf(`{"from":%q,"to":%q,"amount":%d}`, tr.from, tr.to, tr.amount)
	req, _ := http.NewRequest("POST", "http://"+r.s.addr+"/transfers", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", tr.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST /transfers: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 201 || (res.Header.Get("Idempotent-Replayed") == "true") != replay {
		t.Errorf("POST /transfers with key %s (start %d): %s, replayed %q; want 201, replayed %v",
			tr.key, r.starts, res.Status, res.Header.Get("Idempotent-Replayed"), replay)
	}
}

// createAccounts opens every account of the plan over HTTP.
func (r *e2eRun) createAccounts(p *e2ePlan) {
	t := r.t
	t.Helper()
	for _, id := range p.accounts {
		if status, body := r.s.do(t, "PUT", "/accounts/"+id, "", fmt.Sprintf(`{"balance":%d}`, e2eInitial)); status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, status, body)
		}
	}
}

// audit checks the ledger against the plan: every accepted command applied
// exactly once, as sent, with its message id; no refused command applied;
// the HTTP transfers once each, without a message id; every balance as the
// accepted commands and HTTP transfers make it, and the money conserved.
func (r *e2eRun) audit(p *e2ePlan, viaHTTP []e2eHTTPTransfer) {
	t := r.t
	t.Helper()
	status, body := r.s.do(t, "GET", "/transfers", "", "")
	var list transfers.TransferList
	if status != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("GET /transfers: %d %.300s", status, body)
	}
	if list.Count != len(list.Transfers) {
		t.Errorf("GET /transfers: count %d for %d transfers", list.Count, len(list.Transfers))
	}
	byID := map[string][]transfers.Transfer{}
	var plain []transfers.Transfer
	for _, tr := range list.Transfers {
		if tr.MessageID == "" {
			plain = append(plain, tr)
		} else {
			byID[tr.MessageID] = append(byID[tr.MessageID], tr)
		}
	}
	bad := 0
	report := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	balance := map[string]int64{}
	for _, a := range p.accounts {
		balance[a] = e2eInitial
	}
	applied := 0
	for _, c := range p.cmds {
		got := byID[c.id]
		delete(byID, c.id)
		switch {
		case !c.accepted && len(got) > 0:
			report("refused command %s (%s) was applied %d times: %+v", c.id, c.kind, len(got), got)
		case !c.accepted:
		case len(got) != 1:
			report("command %s was applied %d times, want once", c.id, len(got))
		case got[0].From != c.from || got[0].To != c.to || got[0].Amount != c.amount:
			report("command %s applied as %+v, want %s -> %s %d", c.id, got[0], c.from, c.to, c.amount)
		}
		if c.accepted {
			applied++
			balance[c.from] -= c.amount
			balance[c.to] += c.amount
		}
	}
	for id, got := range byID {
		report("transfers with message_id %q, which no command has: %+v", id, got)
	}
	if len(plain) != len(viaHTTP) {
		report("%d transfers without a message_id, want the %d made over HTTP: %+v", len(plain), len(viaHTTP), plain)
	}
	for i, h := range viaHTTP {
		if i < len(plain) && (plain[i].From != h.from || plain[i].To != h.to || plain[i].Amount != h.amount) {
			report("HTTP transfer %s recorded as %+v", h.key, plain[i])
		}
		balance[h.from] -= h.amount
		balance[h.to] += h.amount
	}
	if bad > 20 {
		t.Errorf("… and %d more discrepancies", bad-20)
	}
	var sum int64
	for _, a := range p.accounts {
		status, body := r.s.do(t, "GET", "/accounts/"+a, "", "")
		var acc transfers.Account
		if status != 200 || json.Unmarshal([]byte(body), &acc) != nil {
			t.Fatalf("GET /accounts/%s: %d %s", a, status, body)
		}
		sum += acc.Balance
		if acc.Balance != balance[a] {
			t.Errorf("balance of %s = %d, want %d", a, acc.Balance, balance[a])
		}
	}
	if want := int64(len(p.accounts)) * e2eInitial; sum != want {
		t.Errorf("money not conserved: the balances sum to %d, want %d", sum, want)
	}
	t.Logf("audit: %d commands applied once each, %d refused, %d HTTP transfers; %d copies stored by the broker (%d late; %d late ones dropped by it); %d servers, %d killed with messages pending",
		applied, len(p.cmds)-applied, len(viaHTTP), r.dupStored, r.lateStored, r.lateDropped, r.starts, r.killedMidway)
}

// e2eWarnings returns the lines of a server's log at WARN or ERROR, and
// the inbox's retries.
func e2eWarnings(log string) string {
	var out []string
	for l := range strings.Lines(log) {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "outcome=retry") {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return strings.Join(out, "\n")
}
