package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
)

const scope = "outboxtest"

// clock is a settable clock for the Guard and the relay.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}
func (c *clock) Now() time.Time         { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration)    { c.ns.Add(int64(d)) }
func ctxT(t testing.TB) context.Context { return t.Context() }

func newGuard(t testing.TB, s idem.Store, now func() time.Time) *idem.Guard {
	t.Helper()
	cfg := &idem.Config{TTL: time.Hour, ReplayCacheBytes: -1}
	if now != nil {
		cfg.Now = now
	}
	g, err := idem.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func newRelay(src outbox.Source, b *Broker, cfg *outbox.RelayConfig) *outbox.Relay {
	c := outbox.RelayConfig{PollInterval: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	if cfg != nil {
		c = *cfg
	}
	return outbox.NewRelay(src, b, &c)
}

// drain runs the relay's claims until one comes back empty (at most
// rounds), and returns the last error.
func drain(t testing.TB, r *outbox.Relay, rounds int) error {
	t.Helper()
	var last error
	for range rounds {
		n, err := r.RunOnce(ctxT(t))
		last = err
		if n == 0 && err == nil {
			return nil
		}
	}
	return last
}

// stage runs Guard.Do for key with a work that stages msgs and returns
// werr.
func stage(t testing.TB, g *idem.Guard, key string, werr error, msgs ...outbox.Message) error {
	t.Helper()
	_, _, err := g.Do(ctxT(t), idem.Request{Scope: scope, Key: key}, func(ctx context.Context) (idem.Result, error) {
		if err := outbox.Stage(ctx, msgs...); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 200}, werr
	})
	return err
}

func ids(es []outbox.Envelope) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func backlog(t testing.TB, src outbox.Source) outbox.Backlog {
	t.Helper()
	b, err := src.Backlog(ctxT(t))
	if err != nil {
		t.Fatalf("Backlog: %v", err)
	}
	return b
}

func committedMessageIsPublishedOnceWithItsID(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	g := newGuard(t, s, nil)
	m := outbox.Message{Name: "created", Subject: "things.created", Body: []byte(`{"n":1}`),
		Headers: map[string]string{"Content-Type": "application/json"}, PartitionKey: "acct-1"}
	if err := stage(t, g, "k1", nil, m, outbox.Message{Name: "second", Subject: "things.other"}); err != nil {
		t.Fatal(err)
	}
	if b := backlog(t, src); b.Pending != 2 || b.OldestPending.IsZero() {
		t.Errorf("Backlog after the commit = %+v, want 2 pending with an oldest time", b)
	}
	b := &Broker{}
	r := newRelay(src, b, nil)
	if err := drain(t, r, 10); err != nil {
		t.Fatal(err)
	}
	got := b.Confirmed()
	want := []string{outbox.ID(idem.StoredScope(scope), "k1", "created"), outbox.ID(idem.StoredScope(scope), "k1", "second")}
	if !slices.Equal(ids(got), want) {
		t.Fatalf("confirmed %v, want %v in staging order", ids(got), want)
	}
	e := got[0]
	if e.Subject != m.Subject || string(e.Body) != string(m.Body) || !maps.Equal(e.Headers, m.Headers) || e.PartitionKey != m.PartitionKey || e.Attempt != 1 {
		t.Errorf("published %+v, want the staged message %+v with Attempt 1", e, m)
	}
	if len(got[1].Body) != 0 || got[1].Headers != nil {
		t.Errorf("an empty body and no headers came out as %q, %v", got[1].Body, got[1].Headers)
	}
	if err := drain(t, r, 10); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Confirmed()); n != 2 {
		t.Errorf("a second relay pass published again: %d confirms, want 2", n)
	}
	if bl := backlog(t, src); bl.Pending != 0 || bl.Parked != 0 {
		t.Errorf("Backlog after the relay = %+v, want none pending", bl)
	}
	if st := r.Stats(); st.Published != 2 {
		t.Errorf("Stats().Published = %d, want 2", st.Published)
	}
}

func rolledBackMessageIsNeverPublished(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	g := newGuard(t, s, nil)
	if err := stage(t, g, "k1", errors.New("no"), outbox.Message{Name: "created"}); err == nil {
		t.Fatal("the failing work succeeded")
	}
	func() {
		defer func() { _ = recover() }()
		_, _, _ = g.Do(ctxT(t), idem.Request{Scope: scope, Key: "k2"}, func(ctx context.Context) (idem.Result, error) {
			if err := outbox.Stage(ctx, outbox.Message{Name: "created"}); err != nil {
				return idem.Result{}, err
			}
			panic("work panics after staging")
		})
	}()
	b := &Broker{}
	if err := drain(t, newRelay(src, b, nil), 10); err != nil {
		t.Fatal(err)
	}
	if got := b.Confirmed(); len(got) != 0 {
		t.Fatalf("published %v, staged by work that rolled back", ids(got))
	}
	if bl := backlog(t, src); bl.Pending != 0 {
		t.Errorf("Backlog = %+v, want nothing pending", bl)
	}
	// The rolled-back key runs again and stages for real.
	if err := stage(t, g, "k1", nil, outbox.Message{Name: "created"}); err != nil {
		t.Fatal(err)
	}
	if err := drain(t, newRelay(src, b, nil), 10); err != nil {
		t.Fatal(err)
	}
	if got := b.Confirmed(); len(got) != 1 {
		t.Fatalf("published %v after the retry committed, want one", ids(got))
	}
}

func uncommittedMessageIsNotPublished(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	g := newGuard(t, s, nil)
	b := &Broker{}
	r := newRelay(src, b, nil)
	staged, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := g.Do(ctxT(t), idem.Request{Scope: scope, Key: "k1"}, func(ctx context.Context) (idem.Result, error) {
			if err := outbox.Stage(ctx, outbox.Message{Name: "created"}); err != nil {
				return idem.Result{}, err
			}
			close(staged)
			<-release
			return idem.Result{Status: 200}, nil
		})
		done <- err
	}()
	select {
	case <-staged:
	case err := <-done:
		t.Fatalf("the work ended before staging: %v", err)
	}
	for range 3 {
		if _, err := r.RunOnce(ctxT(t)); err != nil {
			close(release)
			<-done
			t.Fatal(err)
		}
	}
	if got := b.Confirmed(); len(got) != 0 {
		close(release)
		<-done
		t.Fatalf("published %v while its transaction was open", ids(got))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := drain(t, r, 10); err != nil {
		t.Fatal(err)
	}
	if got := b.Confirmed(); len(got) != 1 {
		t.Fatalf("published %v after the commit, want one", ids(got))
	}
}

func reExecutionStagesTheSameIDOnce(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	c := newClock()
	g := newGuard(t, s, c.Now)
	m := outbox.Message{Name: "created", Body: []byte("first")}
	if err := stage(t, g, "k1", nil, m); err != nil {
		t.Fatal(err)
	}
	if err := stage(t, g, "k1", nil, m); err != nil { // a replay: the work does not run
		t.Fatal(err)
	}
	c.Add(2 * time.Hour) // the record expires: the next call runs the work again
	if err := stage(t, g, "k1", nil, outbox.Message{Name: "created", Body: []byte("second")}); err != nil {
		t.Fatal(err)
	}
	b := &Broker{}
	if err := drain(t, newRelay(src, b, nil), 10); err != nil {
		t.Fatal(err)
	}
	got := b.Confirmed()
	if len(got) != 1 || got[0].ID != outbox.ID(idem.StoredScope(scope), "k1", "created") || string(got[0].Body) != "first" {
		t.Fatalf("published %v, want the first message alone", got)
	}
}

func stageOutsideATransactionFails(t testing.TB, h *Harness) {
	_, src := h.Open(t)
	err := outbox.Stage(ctxT(t), outbox.Message{Name: "created"})
	if !errors.Is(err, outbox.ErrNoTx) {
		t.Errorf("Stage outside a transaction = %v, want ErrNoTx", err)
	}
	if bl := backlog(t, src); bl.Pending != 0 {
		t.Errorf("Backlog = %+v, want nothing staged", bl)
	}
}

func markedSentOnlyAfterConfirm(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	g := newGuard(t, s, nil)
	for i := range 3 {
		if err := stage(t, g, fmt.Sprint("k", i), nil, outbox.Message{Name: "created"}); err != nil {
			t.Fatal(err)
		}
	}
	var down atomic.Bool
	down.Store(true)
	b := &Broker{Fail: func(outbox.Envelope) error {
		if down.Load() {
			return errDown
		}
		return nil
	}}
	r := newRelay(src, b, nil)
	for range 3 {
		if _, err := r.RunOnce(ctxT(t)); err == nil {
			t.Fatal("RunOnce with the broker down returned no error")
		}
	}
	if bl := backlog(t, src); bl.Pending != 3 || bl.Parked != 0 {
		t.Fatalf("Backlog with the broker down = %+v, want 3 pending, none parked (failures are not refusals)", bl)
	}
	down.Store(false)
	if err := drain(t, r, 10); err != nil {
		t.Fatal(err)
	}
	got := b.Confirmed()
	if len(got) != 3 {
		t.Fatalf("confirmed %v once the broker was back, want the 3 messages", ids(got))
	}
	if first := got[0].ID; b.Tries(first) < 4 {
		t.Errorf("%s was tried %d times, want the 3 failed tries and the good one", first, b.Tries(first))
	}
	if bl := backlog(t, src); bl.Pending != 0 {
		t.Errorf("Backlog = %+v, want none pending", bl)
	}
}

func relayDyingMidClaimLosesNothing(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	g := newGuard(t, s, nil)
	for i := range 4 {
		if err := stage(t, g, fmt.Sprint("k", i), nil, outbox.Message{Name: "created"}); err != nil {
			t.Fatal(err)
		}
	}
	b := &Broker{}
	// A relay claims, the broker confirms two messages, and the relay dies
	// before it marks them: its claim ends unfinished.
	c, err := src.Claim(ctxT(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	msgs := c.Messages()
	if len(msgs) != 4 {
		_ = c.Abort(ctxT(t))
		t.Fatalf("claimed %d messages, want 4", len(msgs))
	}
	for _, e := range msgs[:2] {
		_ = b.Publish(ctxT(t), e)
	}
	if err := c.Abort(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := drain(t, newRelay(src, b, nil), 10); err != nil {
		t.Fatal(err)
	}
	got := ids(b.Confirmed())
	want := append(ids(msgs[:2]), ids(msgs)...)
	if !slices.Equal(got, want) {
		t.Fatalf("confirmed %v, want the two confirmed before the crash and then all four again: %v", got, want)
	}
}

func refusedMessageIsParkedNeverDropped(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	g := newGuard(t, s, nil)
	poison := outbox.Message{Name: "poison", Subject: "too.big", PartitionKey: "p"}
	if err := stage(t, g, "k0", nil, poison); err != nil {
		t.Fatal(err)
	}
	if err := stage(t, g, "k1", nil, outbox.Message{Name: "fine", PartitionKey: "p"}, outbox.Message{Name: "other", PartitionKey: "q"}); err != nil {
		t.Fatal(err)
	}
	poisonID := outbox.ID(idem.StoredScope(scope), "k0", "poison")
	refuse := atomic.Bool{}
	refuse.Store(true)
	b := &Broker{Fail: func(e outbox.Envelope) error {
		if e.ID == poisonID && refuse.Load() {
			return outbox.Refused(errors.New("message too large"))
		}
		return nil
	}}
	r := newRelay(src, b, &outbox.RelayConfig{MaxAttempts: 3, PollInterval: 10 * time.Millisecond})
	for range 10 {
		if _, err := r.RunOnce(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Tries(poisonID); n != 3 {
		t.Errorf("the poison message was tried %d times, want 3 (MaxAttempts)", n)
	}
	got := ids(b.Confirmed())
	if len(got) != 2 || slices.Contains(got, poisonID) {
		t.Errorf("confirmed %v, want the two other messages", got)
	}
	bl := backlog(t, src)
	if bl.Parked != 1 || bl.Pending != 0 {
		t.Errorf("Backlog = %+v, want one parked, none pending", bl)
	}
	if st := r.Stats(); st.Parked != 1 || st.Refused != 3 {
		t.Errorf("Stats = %+v, want Parked 1, Refused 3", st)
	}
	parked, err := src.Parked(ctxT(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 1 || parked[0].ID != poisonID || parked[0].LastError == "" || parked[0].Subject != poison.Subject || parked[0].ParkedAt.IsZero() {
		t.Fatalf("Parked = %+v, want the poison message with its last error", parked)
	}
	refuse.Store(false)
	ok, err := src.Unpark(ctxT(t), poisonID)
	if err != nil || !ok {
		t.Fatalf("Unpark = %v, %v", ok, err)
	}
	if err := drain(t, r, 10); err != nil {
		t.Fatal(err)
	}
	if got := ids(b.Confirmed()); !slices.Contains(got, poisonID) {
		t.Errorf("confirmed %v after Unpark, want the poison message too", got)
	}
	if bl := backlog(t, src); bl.Parked != 0 || bl.Pending != 0 {
		t.Errorf("Backlog after Unpark = %+v, want empty", bl)
	}
}

// checkPartitionOrder checks that, within each partition key, the first
// confirm of each message follows staging order.
func checkPartitionOrder(t testing.TB, confirmed []outbox.Envelope, order map[string]int) {
	t.Helper()
	last := map[string]int{}
	seen := map[string]bool{}
	for _, e := range confirmed {
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		n := order[e.ID]
		if p, ok := last[e.PartitionKey]; ok && n < p {
			t.Errorf("partition %s: message #%d confirmed after #%d", e.PartitionKey, n, p)
		}
		last[e.PartitionKey] = n
	}
	if len(seen) != len(order) {
		t.Errorf("confirmed %d distinct messages, want %d", len(seen), len(order))
	}
}

func partitionOrderHoldsThroughFailures(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	g := newGuard(t, s, nil)
	order := map[string]int{}
	for i := range 60 {
		m := outbox.Message{Name: "m", PartitionKey: fmt.Sprint("p", i%3)}
		key := fmt.Sprint("k", i)
		if err := stage(t, g, key, nil, m); err != nil {
			t.Fatal(err)
		}
		order[outbox.ID(idem.StoredScope(scope), key, "m")] = i
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	b := &Broker{Fail: func(outbox.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		switch rng.IntN(10) {
		case 0:
			return outbox.Refused(errors.New("refused once"))
		case 1:
			return errDown
		}
		return nil
	}}
	r := newRelay(src, b, &outbox.RelayConfig{BatchSize: 7, MaxAttempts: 1000})
	for range 200 {
		if bl := backlog(t, src); bl.Pending == 0 {
			break
		}
		_, _ = r.RunOnce(ctxT(t))
	}
	checkPartitionOrder(t, b.Confirmed(), order)
}

func sweepDeletesOnlySentMessagesPastRetention(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	g := newGuard(t, s, nil)
	for i := range 3 {
		if err := stage(t, g, fmt.Sprint("k", i), nil, outbox.Message{Name: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stage(t, g, "poison", nil, outbox.Message{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	poisonID := outbox.ID(idem.StoredScope(scope), "poison", "m")
	c := newClock()
	b := &Broker{Fail: func(e outbox.Envelope) error {
		if e.ID == poisonID {
			return outbox.Refused(errors.New("never"))
		}
		return nil
	}}
	r := newRelay(src, b, &outbox.RelayConfig{MaxAttempts: 1, Retention: time.Hour, Now: c.Now})
	if err := drain(t, r, 10); err != nil {
		t.Fatal(err)
	}
	if err := stage(t, g, "late", nil, outbox.Message{Name: "m"}); err != nil { // pending, never relayed
		t.Fatal(err)
	}
	if n, err := r.Sweep(ctxT(t)); err != nil || n != 0 {
		t.Fatalf("a sweep within the retention deleted %d (%v), want 0", n, err)
	}
	c.Add(2 * time.Hour)
	if n, err := r.Sweep(ctxT(t)); err != nil || n != 3 {
		t.Fatalf("a sweep past the retention deleted %d (%v), want the 3 sent", n, err)
	}
	if bl := backlog(t, src); bl.Pending != 1 || bl.Parked != 1 {
		t.Errorf("Backlog after the sweep = %+v, want the late one pending and the poison parked", bl)
	}
	// A swept message's id is gone with it: what stays is what was not sent.
	b2 := &Broker{}
	if err := drain(t, newRelay(src, b2, nil), 10); err != nil {
		t.Fatal(err)
	}
	if got := b2.Confirmed(); len(got) != 1 || got[0].ID != outbox.ID(idem.StoredScope(scope), "late", "m") {
		t.Errorf("after the sweep the relay published %v, want the late message", ids(got))
	}
}

func localStepStagesWithItsStep(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	ls, ok := s.(idem.LeasedTxStore)
	if !ok {
		t.Skipf("%T has no local steps", s)
	}
	l, err := idem.NewLeased(ls, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = l.Do(ctxT(t), idem.LeasedRequest{Scope: scope, Key: "lk"}, func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		_, err := run.LocalStep(ctx, "fails", func(ctx context.Context) ([]byte, error) {
			if err := outbox.Stage(ctx, outbox.Message{Name: "from-failed-step"}); err != nil {
				return nil, err
			}
			return nil, errors.New("the step fails")
		})
		if err == nil {
			return idem.Result{}, errors.New("the failing step succeeded")
		}
		_, err = run.LocalStep(ctx, "debit", func(ctx context.Context) ([]byte, error) {
			return []byte("ok"), outbox.Stage(ctx, outbox.Message{Name: "debited"})
		})
		return idem.Result{Status: 200}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{}
	if err := drain(t, newRelay(src, b, nil), 10); err != nil {
		t.Fatal(err)
	}
	got := ids(b.Confirmed())
	want := []string{outbox.ID(idem.StoredScope(scope), "lk", "debited")}
	if !slices.Equal(got, want) {
		t.Fatalf("confirmed %v, want %v", got, want)
	}
}

func concurrentRelaysNeverPublishAMessageTwiceAtOnce(t testing.TB, h *Harness) {
	s, src := h.Open(t)
	src2 := h.OpenSource(t, s)
	g := newGuard(t, s, nil)
	order := map[string]int{}
	const n = 100
	for i := range n {
		key := fmt.Sprint("k", i)
		if err := stage(t, g, key, nil, outbox.Message{Name: "m", PartitionKey: fmt.Sprint("p", i%5)}); err != nil {
			t.Fatal(err)
		}
		order[outbox.ID(idem.StoredScope(scope), key, "m")] = i
	}
	// Publishes take uneven times, so that a relay that took a later
	// message of a partition key would confirm it first.
	b := &Broker{During: func(e outbox.Envelope) { time.Sleep(time.Duration(order[e.ID]%7) * 300 * time.Microsecond) }}
	ctx, cancel := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	for _, src := range []outbox.Source{src, src, src2, src2} {
		r := newRelay(src, b, &outbox.RelayConfig{BatchSize: 5, PollInterval: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		wg.Go(func() { _ = r.Run(ctx) })
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if bl := backlog(t, src); bl.Pending == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if ov := b.Overlaps(); len(ov) > 0 {
		t.Errorf("published twice at once: %v", ov)
	}
	got := b.Confirmed()
	if len(got) != n {
		t.Errorf("confirmed %d publishes of %d messages, want each once", len(got), n)
	}
	checkPartitionOrder(t, got, order)
}
