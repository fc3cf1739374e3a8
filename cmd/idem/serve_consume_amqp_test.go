package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/amqptest"
	"github.com/idemkit/idem/memstore"
	amqp "github.com/rabbitmq/amqp091-go"
)

// consumeAMQPTimeout bounds the waits of these tests, generously.
const consumeAMQPTimeout = 60 * time.Second

// startConsumeAMQP opens the "amqp" consume source on queue with h, and
// runs it until the test ends.
func startConsumeAMQP(t *testing.T, queue string, h inbox.Handler) {
	t.Helper()
	ib, err := inbox.New(memstore.New(), &inbox.Config{Name: "transfers"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run, err := consumeSources["amqp"](ctx, consumeParams{
		URL: amqptest.Require(t), Queue: queue, Inbox: ib, Handler: h,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
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

// amqpQueueDepth returns how many messages of queue are ready, or -1 if it
// does not exist.
func amqpQueueDepth(t *testing.T, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	var e *amqp.Error
	if errors.As(err, &e) && e.Code == amqp.NotFound {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

func waitAMQP(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(consumeAMQPTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// amqpPublish publishes body to queue and waits for the broker's confirm
// that the queue holds it: a publish without confirms may be dropped by a
// loaded broker, and a test would then wait for a message never queued.
func amqpPublish(t *testing.T, ch *amqp.Channel, queue, id, body string) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A queue declared a moment ago may refuse a publish (a negative
	// confirm) until it is ready: the broker did not take the message,
	// and it is sent again, a bounded number of times.
	for range 10 {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, amqp.Publishing{MessageId: id, Body: []byte(body), DeliveryMode: amqp.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			t.Fatalf("publish %q to %s: %v", id, queue, err)
		}
		if ok {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("publish %q to %s: refused (negative confirm) 10 times", id, queue)
}

func TestConsumeAMQPRegistered(t *testing.T) {
	for _, scheme := range []string{"amqp", "amqps"} {
		if consumeSources[scheme] == nil {
			t.Errorf("no consume source for %s://", scheme)
		}
	}
}

func TestConsumeAMQPBadURL(t *testing.T) {
	ib, _ := inbox.New(memstore.New(), &inbox.Config{Name: "transfers"})
	h := func(context.Context, *inbox.Message) error { return nil }
	_, err := consumeSources["amqp"](context.Background(), consumeParams{URL: "amqp://guest:guest@127.0.0.1:notaport/", Inbox: ib, Handler: h})
	if err == nil {
		t.Fatal("a bad URL was accepted")
	}
	if strings.Contains(err.Error(), "guest:guest") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// A broker that cannot be reached when idem serve starts is an error,
// which does not show the password.
func TestConsumeAMQPUnreachable(t *testing.T) {
	ib, _ := inbox.New(memstore.New(), &inbox.Config{Name: "transfers"})
	h := func(context.Context, *inbox.Message) error { return nil }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = consumeSources["amqp"](context.Background(), consumeParams{URL: "amqp://guest:s3cret@" + addr + "/", Inbox: ib, Handler: h})
	if err == nil {
		t.Fatal("an unreachable broker was accepted")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// A missing queue is declared, with a dead-letter queue beside it: a
// message without an id lands there; a transfer is applied.
func TestConsumeAMQPDeclaresTheQueue(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	queue := amqptest.Name(t, "transfers")
	t.Cleanup(func() { amqptest.Delete(t, amqptest.URL(), queue+".dead") })
	var mu sync.Mutex
	var got []string
	startConsumeAMQP(t, queue, func(_ context.Context, m *inbox.Message) error {
		mu.Lock()
		got = append(got, m.ID)
		mu.Unlock()
		return nil
	})
	// Declared by the time the source is open, before idem serve listens.
	if amqpQueueDepth(t, conn, queue) < 0 || amqpQueueDepth(t, conn, queue+".dead") < 0 {
		t.Fatal("the queues do not exist once the source is open")
	}
	ch, _ := conn.Channel()
	amqpPublish(t, ch, queue, "", `{"from":"a","to":"b","amount":1}`)
	amqpPublish(t, ch, queue, "m-1", `{"from":"a","to":"b","amount":1}`)
	amqpPublish(t, ch, queue, "m-1", `{"from":"a","to":"b","amount":1}`)
	waitAMQP(t, "the message without an id dead-lettered", func() bool { return amqpQueueDepth(t, conn, queue+".dead") == 1 })
	waitAMQP(t, "an empty queue", func() bool { return amqpQueueDepth(t, conn, queue) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "m-1" {
		t.Errorf("handled %v, want [m-1]", got)
	}
}

// An existing queue is used as it is, whatever its arguments.
func TestConsumeAMQPUsesAnExistingQueue(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	queue := amqptest.Name(t, "transfers")
	t.Cleanup(func() { amqptest.Delete(t, amqptest.URL(), queue+".dead") })
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "classic", "x-max-length": 100}); err != nil {
		t.Fatal(err)
	}
	amqpPublish(t, ch, queue, "m-1", `{}`)
	handled := make(chan string, 1)
	startConsumeAMQP(t, queue, func(_ context.Context, m *inbox.Message) error {
		handled <- m.ID
		return nil
	})
	select {
	case id := <-handled:
		if id != "m-1" {
			t.Errorf("handled %q, want m-1", id)
		}
	case <-time.After(consumeAMQPTimeout):
		t.Fatal("the message on the existing queue was not consumed")
	}
}

// The child process of the redelivery tests: the queue it consumes.
const consumeAMQPChildQueue = "IDEM_CONSUME_AMQP_CHILD_QUEUE"

// A consumer killed (SIGKILL) or frozen (SIGSTOP: no traffic, no close)
// while it holds a message leaves it unacknowledged, and the broker makes
// it ready again within 5 s.
func TestConsumeAMQPRedeliversWithin5s(t *testing.T) {
	if q := os.Getenv(consumeAMQPChildQueue); q != "" {
		consumeAMQPChild(t, q)
		return
	}
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			conn := amqptest.Dial(t)
			queue := amqptest.Name(t, "transfers")
			t.Cleanup(func() { amqptest.Delete(t, amqptest.URL(), queue+".dead") })
			ctx, cancel := context.WithTimeout(context.Background(), consumeAMQPTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestConsumeAMQPRedeliversWithin5s$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), consumeAMQPChildQueue+"="+queue)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			waitAMQP(t, "the queue", func() bool { return amqpQueueDepth(t, conn, queue) >= 0 })
			ch, _ := conn.Channel()
			amqpPublish(t, ch, queue, "m-1", `{}`)
			// The child's output is read to its end, so that it never
			// blocks on a full pipe, and shown when the test fails.
			holding := make(chan struct{})
			var childOut strings.Builder
			var childMu sync.Mutex
			go func() {
				lines := bufio.NewScanner(out)
				for lines.Scan() {
					childMu.Lock()
					childOut.WriteString(lines.Text() + "\n")
					childMu.Unlock()
					if lines.Text() == "HOLDING m-1" {
						close(holding)
					}
				}
			}()
			t.Cleanup(func() {
				if t.Failed() {
					childMu.Lock()
					defer childMu.Unlock()
					t.Logf("the child's output:\n%s", childOut.String())
				}
			})
			select {
			case <-holding:
			case <-time.After(consumeAMQPTimeout / 2):
				t.Fatalf("the child did not take m-1; queue %s: %d ready, dead letters: %d", queue, amqpQueueDepth(t, conn, queue), amqpQueueDepth(t, conn, queue+".dead"))
			}
			if amqpQueueDepth(t, conn, queue) != 0 {
				t.Fatal("the message is ready while the child holds it")
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			waitAMQP(t, "the message ready again", func() bool { return amqpQueueDepth(t, conn, queue) == 1 })
			took := time.Since(start)
			t.Logf("ready again %s after %s", took.Round(time.Millisecond), sig)
			if took > 5*time.Second {
				t.Errorf("the message was ready again %s after %s, want within 5s", took, sig)
			}
		})
	}
}

// consumeAMQPChild consumes queue and holds the first message for ever.
func consumeAMQPChild(t *testing.T, queue string) {
	startConsumeAMQP(t, queue, func(ctx context.Context, m *inbox.Message) error {
		fmt.Printf("HOLDING %s\n", m.ID)
		<-ctx.Done()
		return ctx.Err()
	})
	time.Sleep(consumeAMQPTimeout)
	t.Fatal("the child was not killed")
}
