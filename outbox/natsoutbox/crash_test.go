package natsoutbox_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/crashchild"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/natsoutbox"
	"github.com/idemkit/idem/pgstore"
)

// The crash tests run the test binary again as a child (internal/crashchild)
// that works on a PostgreSQL schema and a JetStream stream and is killed
// with SIGKILL at its point; the parent then relays what is left and checks
// the stream: every committed message stored once, nothing rolled back.

const (
	envMode   = "OUTBOX_CRASH_MODE"
	envDSN    = "OUTBOX_CRASH_DSN"
	envNATS   = "OUTBOX_CRASH_NATS"
	envStream = "OUTBOX_CRASH_STREAM"
	envN      = "OUTBOX_CRASH_N"
	ready     = "OUTBOX_CRASH_READY"
)

const crashN = 40

func subjectOf(stream string) string { return stream + ".created" }

func keyOf(i int) string { return "k" + strconv.Itoa(i) }

// stageN commits n transfers, each staging one message.
func stageN(ctx context.Context, s idem.Store, stream string, from, n int) error {
	g, err := idem.New(s, nil)
	if err != nil {
		return err
	}
	for i := from; i < from+n; i++ {
		_, _, err := g.Do(ctx, idem.Request{Scope: "crash", Key: keyOf(i)}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 201}, outbox.Stage(ctx, outbox.Message{
				Name: "created", Subject: subjectOf(stream), Body: []byte(strconv.Itoa(i)), PartitionKey: "p" + strconv.Itoa(i%4),
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// pausingPublisher confirms through pub, and after the confirm of the
// message number at (counting from 1) announces ready and waits to be
// killed. pausingBatch, a BatchPublisher, publishes the first at messages
// of a batch and then waits.
type pausingPublisher struct {
	pub   *natsoutbox.Publisher
	at    int
	count int
}

func (p *pausingPublisher) Publish(ctx context.Context, e outbox.Envelope) error {
	if err := p.pub.Publish(ctx, e); err != nil {
		return err
	}
	if p.count++; p.count == p.at {
		crashchild.Ready("outbox", ready)
	}
	return nil
}

type pausingBatch struct{ *pausingPublisher }

func (p pausingBatch) PublishBatch(ctx context.Context, es []outbox.Envelope) []error {
	errs := p.pub.PublishBatch(ctx, es[:p.at])
	for _, err := range errs {
		if err != nil {
			crashchild.Fail("outbox", "batch publish:", err)
		}
	}
	crashchild.Ready("outbox", ready) // the rest of the batch is never sent
	return nil
}

// crashChild plays the child of mode, if the binary is one, and never
// returns then.
func crashChild() {
	mode := os.Getenv(envMode)
	if mode == "" {
		return
	}
	ctx := context.Background()
	s, err := pgstore.Open(ctx, os.Getenv(envDSN), nil)
	if err != nil {
		crashchild.Fail("outbox", err)
	}
	stream := os.Getenv(envStream)
	n, _ := strconv.Atoi(os.Getenv(envN))
	switch mode {
	case "commit": // commit, then die before any relay ran
		if err := stageN(ctx, s, stream, 0, n); err != nil {
			crashchild.Fail("outbox", err)
		}
		crashchild.Ready("outbox", ready)
	case "rollback": // die with the staging transaction open
		g, _ := idem.New(s, nil)
		_, _, _ = g.Do(ctx, idem.Request{Scope: "crash", Key: "rolled-back"}, func(ctx context.Context) (idem.Result, error) {
			if err := outbox.Stage(ctx, outbox.Message{Name: "created", Subject: subjectOf(stream)}); err != nil {
				crashchild.Fail("outbox", err)
			}
			crashchild.Ready("outbox", ready)
			return idem.Result{}, nil
		})
	case "confirm", "batch": // die after the broker confirmed, before the mark
		_, js := mustDial(os.Getenv(envNATS))
		pub, _ := natsoutbox.New(js, &natsoutbox.Config{Stream: stream})
		pp := &pausingPublisher{pub: pub, at: n / 2}
		var p outbox.Publisher = pp
		if mode == "batch" {
			p = pausingBatch{pp}
		}
		r := outbox.NewRelay(s.Outbox(), p, &outbox.RelayConfig{BatchSize: n})
		_, err := r.RunOnce(ctx)
		crashchild.Fail("outbox", "the relay returned:", err)
	}
	crashchild.Fail("outbox", "unknown mode", mode)
}

// crashSetup makes a schema with the outbox and a stream, and returns the
// child's environment for mode.
func crashSetup(t *testing.T, mode string) (dsn string, st jetstream.Stream, js jetstream.JetStream, env []string) {
	t.Helper()
	_, dsn = pgtest.Schema(t)
	s, err := pgstore.Open(t.Context(), dsn, nil) // migrates
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, js = natstest.Connect(t)
	st = natstest.Stream(t, js, jetstream.StreamConfig{})
	name := st.CachedInfo().Config.Name
	env = []string{envMode + "=" + mode, envDSN + "=" + dsn, envNATS + "=" + natstest.URL(), envStream + "=" + name, envN + "=" + strconv.Itoa(crashN)}
	return dsn, st, js, env
}

// relayAll relays the schema's outbox to the stream until nothing is
// pending, and returns the relay's stats.
func relayAll(t *testing.T, dsn string, js jetstream.JetStream, stream string) outbox.RelayStats {
	t.Helper()
	s, err := pgstore.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pub, _ := natsoutbox.New(js, &natsoutbox.Config{Stream: stream})
	r := outbox.NewRelay(s.Outbox(), pub, &outbox.RelayConfig{BatchSize: 16})
	for range 100 {
		n, err := r.RunOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if b, err := s.Outbox().Backlog(t.Context()); err != nil || b.Pending != 0 {
		t.Fatalf("Backlog after the relay = %+v, %v; want nothing pending", b, err)
	}
	return r.Stats()
}

// checkStream checks that st holds message i of 0..n-1 exactly once, with
// its outbox id.
func checkStream(t *testing.T, st jetstream.Stream, n int) {
	t.Helper()
	ctx := t.Context()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		t.Fatalf("the stream holds %d messages, want %d (each committed one once)", info.State.Msgs, n)
	}
	seen := map[string]bool{}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		i, _ := strconv.Atoi(string(m.Data))
		id := m.Header.Get("Nats-Msg-Id")
		if id != outbox.ID("crash", keyOf(i), "created") || seen[id] {
			t.Fatalf("message %d: id %q for body %q (seen before: %v)", seq, id, m.Data, seen[id])
		}
		seen[id] = true
	}
}

func TestCrashBetweenCommitAndPublish(t *testing.T) {
	crashChild()
	dsn, st, js, env := crashSetup(t, "commit")
	crashchild.Kill(t, env, ready)
	stats := relayAll(t, dsn, js, st.CachedInfo().Config.Name)
	if stats.Published != crashN {
		t.Errorf("the relay published %d, want the %d committed before the crash", stats.Published, crashN)
	}
	checkStream(t, st, crashN)
}

func TestCrashBetweenConfirmAndMark(t *testing.T) {
	crashChild()
	dsn, st, js, env := crashSetup(t, "confirm")
	s, err := pgstore.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := stageN(t.Context(), s, st.CachedInfo().Config.Name, 0, crashN); err != nil {
		t.Fatal(err)
	}
	s.Close()
	crashchild.Kill(t, env, ready)
	stats := relayAll(t, dsn, js, st.CachedInfo().Config.Name)
	if stats.Published != crashN {
		t.Errorf("the relay published %d, want all %d again (none was marked)", stats.Published, crashN)
	}
	checkStream(t, st, crashN) // the stream's duplicate window dropped the second copies
}

func TestCrashDuringABatch(t *testing.T) {
	crashChild()
	dsn, st, js, env := crashSetup(t, "batch")
	s, err := pgstore.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := stageN(t.Context(), s, st.CachedInfo().Config.Name, 0, crashN); err != nil {
		t.Fatal(err)
	}
	s.Close()
	crashchild.Kill(t, env, ready)
	relayAll(t, dsn, js, st.CachedInfo().Config.Name)
	checkStream(t, st, crashN)
}

func TestCrashRolledBackIsNeverPublished(t *testing.T) {
	crashChild()
	dsn, st, js, env := crashSetup(t, "rollback")
	crashchild.Kill(t, env, ready)
	stats := relayAll(t, dsn, js, st.CachedInfo().Config.Name)
	if stats.Published != 0 {
		t.Errorf("the relay published %d messages of a transaction that died open", stats.Published)
	}
	checkStream(t, st, 0)
}

// TestBrokerRestartWhileStaging kills a private nats-server while
// transfers keep committing and a relay runs, starts it again, and checks
// that every committed message reached the stream once.
func TestBrokerRestartWhileStaging(t *testing.T) {
	srv := natstest.StartServer(t)
	_, js := natstest.Dial(t, srv.URL())
	st := natstest.Stream(t, js, jetstream.StreamConfig{Storage: jetstream.FileStorage})
	name := st.CachedInfo().Config.Name
	_, dsn := pgtest.Schema(t)
	s, err := pgstore.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pub, _ := natsoutbox.New(js, &natsoutbox.Config{Stream: name, AckTimeout: time.Second})
	src := s.Outbox()
	defer src.Close()
	r := outbox.NewRelay(src, pub, &outbox.RelayConfig{BatchSize: 32, PollInterval: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = r.Run(ctx) }()
	defer func() { cancel(); <-relayDone }()

	var staged atomic.Int64
	stop := make(chan struct{})
	stagingDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				stagingDone <- nil
				return
			default:
			}
			if err := stageN(t.Context(), s, name, i, 1); err != nil {
				stagingDone <- err
				return
			}
			staged.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	waitFor(t, "staging and relaying", func() bool { return r.Stats().Published >= 20 })
	srv.Kill()
	before := staged.Load()
	waitFor(t, "staging with the broker down", func() bool { return staged.Load() >= before+50 })
	srv.Start()
	time.Sleep(200 * time.Millisecond)
	close(stop)
	if err := <-stagingDone; err != nil {
		t.Fatal(err)
	}
	n := int(staged.Load())
	waitFor(t, "the relay to catch up", func() bool {
		b, err := src.Backlog(t.Context())
		return err == nil && b.Pending == 0
	})
	// Whether the relay saw a failure depends on timing (the client
	// buffers publishes while it reconnects); what must hold is that
	// nothing was lost or published twice.
	t.Logf("relay failures while the broker was down: %d", r.Stats().Failures)
	checkStream(t, st, n)
}

// TestTwoRelaysOnPostgreSQL runs two relays, each with its own store and
// pool, while transfers commit: every message is published by exactly one
// of them, once, and each partition key reaches the stream in order.
func TestTwoRelaysOnPostgreSQL(t *testing.T) {
	_, js := natstest.Connect(t)
	st := natstest.Stream(t, js, jetstream.StreamConfig{})
	name := st.CachedInfo().Config.Name
	_, dsn := pgtest.Schema(t)
	var stores []*pgstore.Store
	for range 2 {
		s, err := pgstore.Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	inner, _ := natsoutbox.New(js, &natsoutbox.Config{Stream: name})
	var mu sync.Mutex
	count := map[string]int{}
	counted := countingPublisher{pub: inner, count: func(id string) { mu.Lock(); count[id]++; mu.Unlock() }}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var relays []*outbox.Relay
	for _, s := range stores {
		src := s.Outbox()
		defer src.Close()
		r := outbox.NewRelay(src, counted, &outbox.RelayConfig{BatchSize: 8, PollInterval: 20 * time.Millisecond})
		relays = append(relays, r)
		wg.Go(func() { _ = r.Run(ctx) })
	}
	const n = 120
	if err := stageN(t.Context(), stores[0], name, 0, n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both relays to publish everything", func() bool {
		b, err := stores[1].Outbox().Backlog(t.Context())
		return err == nil && b.Pending == 0
	})
	cancel()
	wg.Wait()
	for id, c := range count {
		if c != 1 {
			t.Errorf("%s was published %d times", id, c)
		}
	}
	if len(count) != n {
		t.Errorf("%d messages published, want %d", len(count), n)
	}
	if relays[0].Stats().Published == 0 || relays[1].Stats().Published == 0 {
		t.Logf("one relay did all the work: %+v, %+v", relays[0].Stats(), relays[1].Stats())
	}
	checkStream(t, st, n)
	// Order per partition key: the stream's order of each key's bodies.
	last := map[int]int{}
	for seq := uint64(1); seq <= n; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		i, _ := strconv.Atoi(string(m.Data))
		if p, ok := last[i%4]; ok && i < p {
			t.Errorf("partition p%d: message %d stored after %d", i%4, i, p)
		}
		last[i%4] = i
	}
}

type countingPublisher struct {
	pub   *natsoutbox.Publisher
	count func(id string)
}

func (c countingPublisher) Publish(ctx context.Context, e outbox.Envelope) error {
	c.count(e.ID)
	return c.pub.Publish(ctx, e)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
