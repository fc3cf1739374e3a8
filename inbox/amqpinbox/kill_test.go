package amqpinbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/amqptest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The child process of TestKilledBetweenCommitAndAck: which database, and
// which queue.
const (
	killChildDB    = "IDEM_AMQPINBOX_KILL_DB"
	killChildWhere = "IDEM_AMQPINBOX_KILL_WHERE"
	killChildQueue = "IDEM_AMQPINBOX_KILL_QUEUE"
)

// A consumer process killed with SIGKILL after its commit and before its
// ack leaves the message unacknowledged; the broker delivers it again, and
// the redelivery is a Duplicate: acknowledged, nothing applied twice.
func TestKilledBetweenCommitAndAck(t *testing.T) {
	if os.Getenv(killChildQueue) != "" {
		killChild(t)
		return
	}
	t.Parallel()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			l := db.open(t)
			f := setup(t, l, amqp.QueueTypeQuorum, 0)
			for i := range 3 {
				f.publish(fmt.Sprintf("k-%d", i), int64(10+i))
			}
			l.close() // SQLite: one writing process at a time

			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledBetweenCommitAndAck$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), killChildDB+"="+db.name, killChildWhere+"="+l.where, killChildQueue+"="+f.queue)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the child did not kill itself with SIGKILL (%v):\n%s", err, out.Bytes())
			}

			l = l.reopen(t)
			f.db = l
			applied, _, _ := l.audit(t)
			if len(applied) != 1 {
				t.Fatalf("the child committed %v before it died, want one message", applied)
			}
			var committed string
			for id := range applied {
				committed = id
			}
			ib, err := inbox.New(l.store, &inbox.Config{Name: "transfers", Observer: f.seen.observe})
			if err != nil {
				t.Fatal(err)
			}
			f.ib = ib
			var redelivered atomic.Bool
			f.run(fast, func(ctx context.Context, m *inbox.Message) error {
				if m.ID == committed {
					redelivered.Store(true) // never: the inbox knows it
				}
				return l.transfer(ctx, m)
			}, "")
			waitFor(t, "one duplicate and two applied", func() bool {
				return f.seen.get(inbox.Duplicate) == 1 && f.seen.get(inbox.Applied) == 2
			})
			waitFor(t, "an empty queue", func() bool { return f.depth(f.queue) == 0 })
			if redelivered.Load() {
				t.Errorf("the handler ran again for %s, committed before the kill", committed)
			}
			l.checkOnce(t, f.amount)
		})
	}
}

// killChild consumes the queue and kills its own process with SIGKILL
// right after the first commit, before the ack.
func killChild(t *testing.T) {
	var l *ledger
	switch os.Getenv(killChildDB) {
	case "PostgreSQL":
		l = openPGLedger(t, os.Getenv(killChildWhere))
	case "SQLite":
		l = openSQLiteLedger(t, os.Getenv(killChildWhere))
	default:
		t.Fatalf("unknown database %q", os.Getenv(killChildDB))
	}
	testHookProcessed = func(o inbox.Outcome) {
		if o == inbox.Applied {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute) // SIGKILL is not delivered at once
		}
	}
	ib, err := inbox.New(l.store, &inbox.Config{Name: "transfers"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(ib, l.transfer, &Config{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_ = c.Run(ctx, amqptest.Require(t), os.Getenv(killChildQueue))
	t.Fatal("the child was not killed")
}
