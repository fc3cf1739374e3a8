package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/nats-io/nats.go/jetstream"
)

// natsQueue returns a fresh -consume-queue name, and deletes at clean-up
// the stream consumeNATS makes for it.
func natsQueue(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	q := strings.ToLower(natstest.Name(t))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, strings.ToUpper(q)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Logf("delete stream: %v", err)
		}
	})
	return q
}

// seenInbox is an inbox on a fresh SQLite file whose handler records each
// message id it applies, in the inbox's transaction.
type seenInbox struct {
	store   *sqlitestore.Store
	ib      *inbox.Inbox
	applied chan struct{} // a message was applied (committed)
}

func newSeenInbox(t *testing.T, path string) *seenInbox {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "seen.db")
	}
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.DB().Exec(`CREATE TABLE IF NOT EXISTS seen (id TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	si := &seenInbox{store: s, applied: make(chan struct{}, 1000)}
	si.ib, err = inbox.New(s, &inbox.Config{Name: "transfers", Observer: func(e inbox.Event) {
		if e.Outcome == inbox.Applied {
			si.applied <- struct{}{}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	return si
}

func (si *seenInbox) handle(ctx context.Context, m *inbox.Message) error {
	tx, _ := sqlitestore.TxFrom(ctx)
	_, err := tx.ExecContext(ctx, `INSERT INTO seen (id) VALUES ($1)`, m.ID)
	return err
}

// counts returns how many times each id took effect.
func (si *seenInbox) counts(t *testing.T) map[string]int {
	t.Helper()
	rows, err := si.store.DB().Query(`SELECT id, count(*) FROM seen GROUP BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var id string
		var c int
		if err := rows.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		n[id] = c
	}
	return n
}

// runSource opens the nats source and runs it until clean-up, when it
// must return nil.
func runSource(t *testing.T, p consumeParams) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	run, err := consumeSources["nats"](ctx, p)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

// waitApplied waits until a message has been applied, or fails the test
// after d.
func waitApplied(t *testing.T, si *seenInbox, d time.Duration) {
	t.Helper()
	select {
	case <-si.applied:
	case <-time.After(d):
		t.Fatalf("no message applied within %s", d)
	}
}

// idem serve -consume nats://… creates the stream TRANSFERS-like (the
// queue in upper case) on subject <queue> with the server's default
// duplicate window, and the durable consumer idem-<queue> with explicit
// acks and a 3 s AckWait; it applies messages by their Nats-Msg-Id.
func TestConsumeNATSCreatesStreamAndConsumer(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	q := natsQueue(t, js)
	si := newSeenInbox(t, "")
	runSource(t, consumeParams{URL: natstest.URL(), Queue: q, Inbox: si.ib, Handler: si.handle, Logger: slog.New(slog.DiscardHandler)})

	ctx := context.Background()
	s, err := js.Stream(ctx, strings.ToUpper(q))
	if err != nil {
		t.Fatalf("stream %s: %v", strings.ToUpper(q), err)
	}
	sc := s.CachedInfo().Config
	if len(sc.Subjects) != 1 || sc.Subjects[0] != q || sc.Duplicates != 2*time.Minute {
		t.Errorf("stream subjects %v, duplicate window %s; want [%s], 2m0s", sc.Subjects, sc.Duplicates, q)
	}
	c, err := s.Consumer(ctx, "idem-"+q)
	if err != nil {
		t.Fatalf("consumer idem-%s: %v", q, err)
	}
	cc := c.CachedInfo().Config
	if cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != natsAckWait || cc.MaxDeliver != -1 || cc.Durable != "idem-"+q {
		t.Errorf("consumer %+v; want durable, explicit acks, AckWait %s, MaxDeliver -1", cc, natsAckWait)
	}

	if _, err := natsinbox.Publish(ctx, js, q, []byte(`{"from":"a","to":"b","amount":1}`), "cmd-1"); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, si, 30*time.Second)
	if got := si.counts(t); got["cmd-1"] != 1 || len(got) != 1 {
		t.Errorf("effects %v, want the Nats-Msg-Id cmd-1 once", got)
	}
}

// An existing stream that captures the subject is used as it is: no
// stream is created, the existing one is not changed.
func TestConsumeNATSUsesExistingStream(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	q := natsQueue(t, js)
	existing := natstest.Stream(t, js, jetstream.StreamConfig{Subjects: []string{q, q + "-other"}, Duplicates: time.Minute})
	si := newSeenInbox(t, "")
	runSource(t, consumeParams{URL: natstest.URL(), Queue: q, Inbox: si.ib, Handler: si.handle})

	ctx := context.Background()
	if _, err := js.Stream(ctx, strings.ToUpper(q)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("a stream %s was made beside the existing one (err %v)", strings.ToUpper(q), err)
	}
	info, err := existing.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Duplicates != time.Minute || len(info.Config.Subjects) != 2 {
		t.Errorf("the existing stream was changed: %+v", info.Config)
	}
	if _, err := existing.Consumer(ctx, "idem-"+q); err != nil {
		t.Errorf("no consumer idem-%s on the existing stream: %v", q, err)
	}
	if _, err := natsinbox.Publish(ctx, js, q, []byte(`{}`), "cmd-2"); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, si, 30*time.Second)
	if got := si.counts(t); got["cmd-2"] != 1 || len(got) != 1 {
		t.Errorf("effects %v, want cmd-2 once", got)
	}
}

// The environment of TestConsumeNATSChild.
const (
	natsChildEnv   = "IDEM_CONSUME_NATS_CHILD"
	natsChildQueue = "IDEM_CONSUME_NATS_QUEUE"
	natsChildDB    = "IDEM_CONSUME_NATS_DB"
)

// After a consumer process is killed with SIGKILL, the message it had
// taken and not acknowledged is delivered to another consumer within 5 s,
// and applied once.
func TestConsumeNATSRedeliversWithin5sOfAKill(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	q := natsQueue(t, js)
	db := filepath.Join(t.TempDir(), "seen.db")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestConsumeNATSChild$")
	cmd.Env = append(os.Environ(), natsChildEnv+"=1", natsChildQueue+"="+q, natsChildDB+"="+db)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child creates the stream and consumer, then takes the message.
	for {
		if _, err := js.Stream(ctx, strings.ToUpper(q)); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the child made no stream:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := natsinbox.Publish(ctx, js, q, []byte(`{}`), "cmd-killed"); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	killed := time.Now()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed by SIGKILL: %v\n%s", err, out.String())
	}

	si := newSeenInbox(t, db)
	runSource(t, consumeParams{URL: natstest.URL(), Queue: q, Inbox: si.ib, Handler: si.handle})
	waitApplied(t, si, 30*time.Second)
	d := time.Since(killed)
	t.Logf("redelivered and applied %s after the kill", d.Round(time.Millisecond))
	if d > 5*time.Second {
		t.Errorf("redelivered %s after the kill, want within 5 s", d.Round(time.Millisecond))
	}
	if got := si.counts(t); got["cmd-killed"] != 1 || len(got) != 1 {
		t.Errorf("effects %v, want cmd-killed once", got)
	}
}

// TestConsumeNATSChild is the consumer process of
// TestConsumeNATSRedeliversWithin5sOfAKill: it consumes and kills itself
// with SIGKILL when the first message arrives.
func TestConsumeNATSChild(t *testing.T) {
	if os.Getenv(natsChildEnv) != "1" {
		t.Skip("the child process of TestConsumeNATSRedeliversWithin5sOfAKill")
	}
	si := newSeenInbox(t, os.Getenv(natsChildDB))
	die := func(context.Context, *inbox.Message) error {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := consumeSources["nats"](ctx, consumeParams{URL: natstest.URL(), Queue: os.Getenv(natsChildQueue), Inbox: si.ib, Handler: die})
	if err != nil {
		t.Fatal(err)
	}
	t.Fatalf("still alive: run returned %v", run(ctx))
}

// -consume takes a cluster as a comma-separated URL list. With a stream
// replicated on three nodes (created beforehand: an existing stream is
// used as it is), consumption goes on while the stream's leader is killed
// and restarted: every message applied once.
func TestConsumeNATSCluster(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	_, js := natstest.Dial(t, c.URL())
	q := strings.ToLower(natstest.Name(t))
	var stream jetstream.Stream
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: strings.ToUpper(q), Subjects: []string{q}, Replicas: 3})
		cancel()
		if err == nil {
			stream = s
			break
		}
		if time.Now().After(end) {
			t.Fatalf("create a stream with 3 replicas: %v", err)
		}
	}
	si := newSeenInbox(t, "")
	runSource(t, consumeParams{URL: c.URL(), Queue: q, Inbox: si.ib, Handler: si.handle})

	const n = 60
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			k := fmt.Sprintf("cmd-%d", i)
			for try := 0; ; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := natsinbox.Publish(ctx, js, q, []byte(`{}`), k)
				cancel()
				if err == nil {
					break
				}
				if try == 300 {
					t.Fatalf("publish %s: %v", k, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	publish(0, n/3)
	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	victim := -1
	for i := range c.Len() {
		if info.Cluster != nil && c.NodeName(i) == info.Cluster.Leader {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("no stream leader among the nodes: %+v", info.Cluster)
	}
	c.Kill(victim)
	publish(n/3, 2*n/3)
	c.Start(victim)
	publish(2*n/3, n)
	for range n {
		waitApplied(t, si, 60*time.Second)
	}
	counts := si.counts(t)
	for i := range n {
		if k := fmt.Sprintf("cmd-%d", i); counts[k] != 1 {
			t.Errorf("%s took effect %d times, want 1", k, counts[k])
		}
	}
	if len(counts) != n {
		t.Errorf("%d ids took effect, want %d", len(counts), n)
	}
}
