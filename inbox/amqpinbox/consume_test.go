package amqpinbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/amqptest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// fast retries, so that tests of failing handlers do not wait seconds.
var fast = &Config{RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond}

// A message published twice with one id (a producer's retry) takes effect
// once: the second delivery is a Duplicate, acknowledged.
func TestDuplicatePublishesTakeEffectOnce(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db.open(t), amqp.QueueTypeQuorum, 0)
			const n = 40
			for i := range n {
				id := fmt.Sprintf("transfer-%d", i)
				f.publish(id, int64(i+1))
				f.publish(id, int64(i+1))
			}
			f.run(fast, nil, "")
			waitFor(t, "every message applied once and its copy acknowledged", func() bool {
				return f.seen.get(inbox.Applied) == n && f.seen.get(inbox.Duplicate) == n
			})
			f.db.checkOnce(t, f.amount)
			waitFor(t, "an empty queue", func() bool { return f.depth(f.queue) == 0 })
			if got := f.seen.String(); f.seen.get(inbox.Retry)+f.seen.get(inbox.DeadLetter)+f.seen.get(inbox.Refused) != 0 {
				t.Errorf("outcomes %s, want only applied and duplicate", got)
			}
		})
	}
}

// A handler that fails is retried until it succeeds; the effect commits
// once, and Message.Attempt counts the deliveries, on a quorum queue (from
// x-delivery-count) and on a classic one (counted by the consumer).
func TestFailingHandlerIsRetriedUntilItSucceeds(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		for _, qt := range []string{amqp.QueueTypeQuorum, amqp.QueueTypeClassic} {
			t.Run(db.name+"/"+qt, func(t *testing.T) {
				t.Parallel()
				f := setup(t, db.open(t), qt, 5)
				const n, failures = 10, 2
				for i := range n {
					f.publish(fmt.Sprintf("m-%d", i), 10)
				}
				var mu sync.Mutex
				attempts := map[string][]int{}
				f.run(fast, func(ctx context.Context, m *inbox.Message) error {
					mu.Lock()
					attempts[m.ID] = append(attempts[m.ID], m.Attempt)
					k := len(attempts[m.ID])
					mu.Unlock()
					if k <= failures {
						return errors.New("transient failure")
					}
					return f.db.transfer(ctx, m)
				}, "")
				waitFor(t, "every message applied", func() bool { return f.seen.get(inbox.Applied) == n })
				f.db.checkOnce(t, f.amount)
				if got := f.seen.get(inbox.Retry); got != n*failures {
					t.Errorf("%d retries, want %d", got, n*failures)
				}
				mu.Lock()
				defer mu.Unlock()
				for id, got := range attempts {
					if want := []int{1, 2, 3}; !slices.Equal(got, want) {
						t.Errorf("message %s: attempts %v, want %v", id, got, want)
					}
				}
			})
		}
	}
}

// A refused message (malformed, or refused by the business rules) is
// settled: acknowledged, not redelivered, its refusal recorded so that a
// copy is a Duplicate; or, with DeadLetterRefused, rejected to the
// dead-letter queue.
func TestRefusedMessageIsSettled(t *testing.T) {
	t.Parallel()
	for _, deadLetter := range []bool{false, true} {
		t.Run(fmt.Sprintf("DeadLetterRefused=%v", deadLetter), func(t *testing.T) {
			t.Parallel()
			f := setup(t, newSQLiteLedger(t), amqp.QueueTypeQuorum, 0)
			f.publish("bad-amount", -5)
			f.publish("bad-amount", -5)
			f.publish("good", 7)
			cfg := *fast
			cfg.DeadLetterRefused = deadLetter
			f.run(&cfg, nil, "")
			waitFor(t, "three outcomes", func() bool {
				return f.seen.get(inbox.Refused)+f.seen.get(inbox.Duplicate)+f.seen.get(inbox.Applied) == 3
			})
			if r, d := f.seen.get(inbox.Refused), f.seen.get(inbox.Duplicate); r != 1 || d != 1 {
				t.Errorf("refused %d, duplicate %d; want 1 and 1 (outcomes %s)", r, d, f.seen)
			}
			f.db.checkOnce(t, f.amount)
			want := 0
			if deadLetter {
				want = 1 // the refusal; its copy is a Duplicate, acknowledged
			}
			waitFor(t, "an empty queue", func() bool { return f.depth(f.queue) == 0 })
			waitFor(t, fmt.Sprintf("%d dead letters", want), func() bool { return f.depth(f.dlq) == want })
			if deadLetter {
				if got := f.drain(f.dlq); len(got) != 1 || got[0].MessageId != "bad-amount" {
					t.Errorf("dead letters %v, want the refused message", got)
				}
			}
		})
	}
}

// A message whose handler fails every time is dead-lettered after
// MaxAttempts deliveries, to the dead-letter queue the test declared, on a
// quorum and on a classic queue.
func TestPoisonMessageIsDeadLetteredAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	for _, qt := range []string{amqp.QueueTypeQuorum, amqp.QueueTypeClassic} {
		t.Run(qt, func(t *testing.T) {
			t.Parallel()
			const maxAttempts = 3
			f := setup(t, newSQLiteLedger(t), qt, maxAttempts)
			f.publish("poison", 1)
			f.publish("fine", 2)
			delete(f.amount, "poison")
			var mu sync.Mutex
			var attempts []int
			f.run(fast, func(ctx context.Context, m *inbox.Message) error {
				if m.ID != "poison" {
					return f.db.transfer(ctx, m)
				}
				mu.Lock()
				attempts = append(attempts, m.Attempt)
				mu.Unlock()
				return errors.New("always fails")
			}, "")
			waitFor(t, "the poison message dead-lettered", func() bool { return f.depth(f.dlq) == 1 })
			dead := f.drain(f.dlq)
			if len(dead) != 1 || dead[0].MessageId != "poison" {
				t.Fatalf("dead letters %v, want the poison message", dead)
			}
			waitFor(t, "the other message applied", func() bool { return f.seen.get(inbox.Applied) == 1 })
			f.db.checkOnce(t, f.amount)
			mu.Lock()
			defer mu.Unlock()
			if want := []int{1, 2, 3}; !slices.Equal(attempts, want) {
				t.Errorf("attempts %v, want %v", attempts, want)
			}
			if got := f.seen.get(inbox.DeadLetter); got != 1 {
				t.Errorf("%d dead letters observed, want 1", got)
			}
		})
	}
}

// A message without an id cannot be told from its redelivery: it is
// dead-lettered, not applied. With Config.MessageID the id comes from the
// body instead.
func TestMessageID(t *testing.T) {
	t.Parallel()
	f := setup(t, newSQLiteLedger(t), amqp.QueueTypeQuorum, 0)
	ctx := context.Background()
	raw := func(body transferBody, id string) {
		b, _ := json.Marshal(body)
		if err := f.pub.PublishWithContext(ctx, "", f.queue, false, false, amqp.Publishing{Body: b, MessageId: id}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("MissingIsDeadLettered", func(t *testing.T) {
		raw(transferBody{Amount: 3}, "")
		stop := f.run(fast, nil, "")
		waitFor(t, "the message dead-lettered", func() bool { return f.depth(f.dlq) == 1 })
		stop()
		f.db.checkOnce(t, nil)
		f.drain(f.dlq)
	})
	t.Run("FromTheBody", func(t *testing.T) {
		raw(transferBody{Amount: 4, Ref: "order-1"}, "broker-id-1")
		raw(transferBody{Amount: 4, Ref: "order-1"}, "broker-id-2") // a copy with another broker id
		raw(transferBody{Amount: 5}, "broker-id-3")                 // no business id: dead-lettered
		stop := f.run(&Config{MessageID: func(d amqp.Delivery) (string, error) {
			var b transferBody
			if err := json.Unmarshal(d.Body, &b); err != nil {
				return "", err
			}
			if b.Ref == "" {
				return "", errors.New("no ref in the body")
			}
			return b.Ref, nil
		}}, nil, "")
		waitFor(t, "one applied, one duplicate", func() bool {
			return f.seen.get(inbox.Applied) == 1 && f.seen.get(inbox.Duplicate) == 1
		})
		waitFor(t, "the message without a ref dead-lettered", func() bool { return f.depth(f.dlq) == 1 })
		stop()
		f.db.checkOnce(t, map[string]int64{"order-1": 4})
	})
}

// Several consumers on one queue, with duplicates and failing first
// attempts, apply every message exactly once.
func TestSeveralConsumersApplyEachMessageOnce(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db.open(t), amqp.QueueTypeQuorum, 10)
			const n = 150
			for i := range n {
				id := fmt.Sprintf("t-%d", i)
				f.publish(id, int64(i%17+1))
				if i%5 == 0 {
					f.publish(id, int64(i%17+1))
				}
			}
			var mu sync.Mutex
			failed := map[string]bool{}
			h := func(ctx context.Context, m *inbox.Message) error {
				mu.Lock()
				fail := len(m.ID)%2 == 0 && !failed[m.ID] // some messages fail once
				failed[m.ID] = true
				mu.Unlock()
				if fail {
					return errors.New("first attempt fails")
				}
				return f.db.transfer(ctx, m)
			}
			cfg := *fast
			cfg.Concurrency = 3
			for range 4 {
				f.run(&cfg, h, "")
			}
			waitFor(t, "every message applied", func() bool { return f.seen.get(inbox.Applied) == n })
			waitFor(t, "an empty queue", func() bool { return f.depth(f.queue) == 0 })
			f.db.checkOnce(t, f.amount)
		})
	}
}

// Stopping Consume requeues what it had been sent and not processed, and
// returns nil.
func TestConsumeStopsAndRequeues(t *testing.T) {
	t.Parallel()
	f := setup(t, newSQLiteLedger(t), amqp.QueueTypeQuorum, 0)
	for i := range 20 {
		f.publish(fmt.Sprintf("s-%d", i), 1)
	}
	c, err := New(f.ib, func(ctx context.Context, m *inbox.Message) error {
		<-ctx.Done() // blocks until Consume is stopped
		return ctx.Err()
	}, &Config{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := amqptest.Dial(t).Channel()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, ch, f.queue) }()
	waitFor(t, "prefetched deliveries", func() bool { return f.depth(f.queue) == 10 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Consume: %v, want nil", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Consume did not return")
	}
	// The channel is still open: nothing was requeued by its closing.
	waitFor(t, "every message back in the queue", func() bool { return f.depth(f.queue) == 20 })
	if ch.IsClosed() {
		t.Error("Consume closed the caller's channel")
	}
}

// A handler that panics is a failing handler: its message is retried,
// then dead-lettered, and the consumer carries on with the next ones.
func TestPanickingHandlerIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := setup(t, newSQLiteLedger(t), amqp.QueueTypeQuorum, 2)
	f.publish("panics", 1)
	f.publish("fine", 2)
	delete(f.amount, "panics")
	f.run(fast, func(ctx context.Context, m *inbox.Message) error {
		if m.ID == "panics" {
			panic("boom")
		}
		return f.db.transfer(ctx, m)
	}, "")
	waitFor(t, "the panicking message dead-lettered", func() bool { return f.depth(f.dlq) == 1 })
	waitFor(t, "the other message applied", func() bool { return f.seen.get(inbox.Applied) == 1 })
	f.db.checkOnce(t, f.amount)
}

// A failing message is held for the retry delay before it is requeued,
// so it does not spin: consecutive attempts are at least 3/4 of the delay
// apart (the delay less its jitter).
func TestRetryIsDelayed(t *testing.T) {
	t.Parallel()
	f := setup(t, newSQLiteLedger(t), amqp.QueueTypeQuorum, 4)
	f.publish("slow", 1)
	const delay = 200 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	f.run(&Config{RetryDelay: delay, MaxRetryDelay: delay}, func(ctx context.Context, m *inbox.Message) error {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return errors.New("fails")
	}, "")
	waitFor(t, "the message dead-lettered", func() bool { return f.depth(f.dlq) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 4 {
		t.Fatalf("%d attempts, want 4", len(at))
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < delay*3/4 {
			t.Errorf("attempt %d came %s after the previous one, want at least %s", i+1, gap, delay*3/4)
		}
	}
}

// Handle, for callers with their own loop, settles each delivery as
// Consume does: applied and duplicate acknowledged, a failure requeued
// after its delay.
func TestHandle(t *testing.T) {
	t.Parallel()
	f := setup(t, newSQLiteLedger(t), amqp.QueueTypeQuorum, 0)
	f.publish("h-1", 5)
	f.publish("h-1", 5)
	f.publish("h-2", 6)
	fail := true
	c, err := New(f.ib, func(ctx context.Context, m *inbox.Message) error {
		if m.ID == "h-2" && fail {
			fail = false
			return errors.New("fails once")
		}
		return f.db.transfer(ctx, m)
	}, fast)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := f.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(f.queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []inbox.Outcome
	for len(got) < 4 {
		select {
		case d := <-deliveries:
			o, _ := c.Handle(ctx, d)
			got = append(got, o)
		case <-time.After(waitTimeout):
			t.Fatalf("outcomes so far %v", got)
		}
	}
	want := []inbox.Outcome{inbox.Applied, inbox.Duplicate, inbox.Retry, inbox.Applied}
	if !slices.Equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	_ = ch.Close()
	waitFor(t, "an empty queue", func() bool { return f.depth(f.queue) == 0 })
	f.db.checkOnce(t, f.amount)
}
