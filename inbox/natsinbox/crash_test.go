package natsinbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// The child process's parameters, passed in its environment.
const (
	childEnv       = "IDEM_NATSINBOX_CHILD"
	childDBKind    = "IDEM_NATSINBOX_DB_KIND"
	childDBWhere   = "IDEM_NATSINBOX_DB"
	childStream    = "IDEM_NATSINBOX_STREAM"
	childInboxName = "crash"
)

// A consumer process killed with SIGKILL after its commit and before its
// ack leaves the message unacknowledged; the server delivers it again
// after AckWait to another consumer, whose inbox answers Duplicate: it is
// acked, and the effect stays once.
func TestKilledBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, kind string) {
		_, js := natstest.Connect(t)
		r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: 2 * time.Second})
		l := newLedger(t, kind)
		l.close() // SQLite: one writing process at a time
		k := key(t, 1)
		r.publish(t, k, 42)

		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(),
			childEnv+"=1",
			childDBKind+"="+kind,
			childDBWhere+"="+l.where,
			childStream+"="+r.stream.CachedInfo().Config.Name,
		)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the child was not killed by SIGKILL: %v\n%s", err, out)
		}

		l = openLedger(t, kind, l.where)
		l.checkOnce(t, map[string]int64{k: 42})
		info, err := r.cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 1 {
			t.Fatalf("%d unacknowledged after the kill, want 1 (committed, never acked)", info.NumAckPending)
		}

		ib, rec := newInbox(t, l, inbox.Config{Name: childInboxName})
		consume(t, r.cons, ib, apply, nil)
		rec.waitFor(t, 30*time.Second, "the redelivery, a duplicate", func() bool { return rec.count(inbox.Duplicate) == 1 })
		settled(t, r.cons, 30*time.Second)
		if ev := rec.all(); len(ev) != 1 || ev[0].Attempt != 2 {
			t.Errorf("events = %+v, want one duplicate on attempt 2", ev)
		}
		l.checkOnce(t, map[string]int64{k: 42})
	})
}

// TestCrashChild is the consumer process of TestKilledBetweenCommitAndAck:
// it consumes, and kills itself with SIGKILL right after the first commit,
// before the ack.
func TestCrashChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("the child process of TestKilledBetweenCommitAndAck")
	}
	_, js := natstest.Connect(t)
	cons, err := js.Consumer(context.Background(), os.Getenv(childStream), "idem")
	if err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, os.Getenv(childDBKind), os.Getenv(childDBWhere))
	ib, _ := newInbox(t, l, inbox.Config{Name: childInboxName})
	cfg := &natsinbox.Config{}
	natsinbox.SetAfterProcess(cfg, func(o inbox.Outcome) {
		if o == inbox.Applied {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = natsinbox.Consume(ctx, cons, ib, apply, cfg)
	t.Fatalf("still alive after Consume returned %v: the message was never applied", err)
}
