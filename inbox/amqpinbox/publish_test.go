package amqpinbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem/internal/amqptest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Publish sets message_id from the id, sends the message persistent, and
// returns once the broker confirmed it.
func TestPublishSetsTheIDAndWaitsForTheConfirm(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, amqp.QueueTypeClassic, 0)
	ctx := context.Background()
	if err := Publish(ctx, f.pub, "", f.queue, amqp.Publishing{Body: []byte("x")}, "intent-1"); err != nil {
		t.Fatal(err)
	}
	// Confirmed: the queue holds it now, with no wait.
	if got := f.depth(f.queue); got != 1 {
		t.Fatalf("queue holds %d messages right after the confirm, want 1", got)
	}
	d := f.drain(f.queue)[0]
	if d.MessageId != "intent-1" || d.DeliveryMode != amqp.Persistent {
		t.Errorf("message_id %q, delivery mode %d; want %q, %d", d.MessageId, d.DeliveryMode, "intent-1", amqp.Persistent)
	}
}

// A message no queue takes is an error, not a confirmed loss; publishes
// on the same channel around it are not affected.
func TestPublishUnroutableIsAnError(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, amqp.QueueTypeClassic, 0)
	ctx := context.Background()
	nowhere := amqptest.Name(t, "nowhere")
	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range errs {
		wg.Go(func() {
			key := f.queue
			if i%3 == 0 {
				key = nowhere
			}
			errs[i] = Publish(ctx, f.pub, "", key, amqp.Publishing{Body: []byte("x")}, fmt.Sprintf("id-%d", i%10))
		})
	}
	wg.Wait()
	routed := 0
	for i, err := range errs {
		switch {
		case i%3 == 0 && !errors.Is(err, ErrUnroutable):
			t.Errorf("publish %d to no queue: %v, want ErrUnroutable", i, err)
		case i%3 != 0 && err != nil:
			t.Errorf("publish %d to the queue: %v", i, err)
		case i%3 != 0:
			routed++
		}
	}
	if got := f.depth(f.queue); got != routed {
		t.Errorf("queue holds %d messages, want %d", got, routed)
	}
}

// A message the broker refuses (a full queue that rejects publishes) is an
// error.
func TestPublishNackedIsAnError(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	q := amqptest.Name(t, "full")
	if _, err := DeclareQueue(conn, q, amqp.Table{"x-queue-type": amqp.QueueTypeClassic, "x-max-length": 0, "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	err = Publish(context.Background(), ch, "", q, amqp.Publishing{Body: []byte("x")}, "id")
	if !errors.Is(err, ErrNacked) {
		t.Fatalf("Publish to a full queue: %v, want ErrNacked", err)
	}
}

// Publish refuses what would make the id meaningless, before sending
// anything.
func TestPublishRejectsBadIDs(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, amqp.QueueTypeClassic, 0)
	for _, tc := range []struct {
		name, id, msgID, want string
	}{
		{"Empty", "", "", "id is empty"},
		{"TooLong", strings.Repeat("x", 256), "", "at most 255"},
		{"Conflicting", "a", "b", "differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Publish(context.Background(), f.pub, "", f.queue, amqp.Publishing{MessageId: tc.msgID}, tc.id)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if got := f.depth(f.queue); got != 0 {
		t.Errorf("%d messages sent, want 0", got)
	}
}

// DeclareQueue declares a missing queue as a quorum queue, and uses an
// existing queue as it is, whatever its arguments: never
// PRECONDITION_FAILED because of its own.
func TestDeclareQueue(t *testing.T) {
	t.Parallel()
	conn := amqptest.Dial(t)
	t.Run("Missing", func(t *testing.T) {
		q := amqptest.Name(t, "new")
		declared, err := DeclareQueue(conn, q, nil)
		if err != nil || !declared {
			t.Fatalf("DeclareQueue = %v, %v; want true, nil", declared, err)
		}
		// A quorum queue: declaring it classic now conflicts.
		ch, _ := conn.Channel()
		_, err = ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": amqp.QueueTypeClassic})
		if !isAMQPError(err, amqp.PreconditionFailed) {
			t.Errorf("declaring it classic: %v, want PRECONDITION_FAILED (it should be quorum)", err)
		}
	})
	t.Run("ExistingWithOtherArguments", func(t *testing.T) {
		q := amqptest.Name(t, "old")
		ch, _ := conn.Channel()
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": amqp.QueueTypeClassic, "x-max-length": 1000}); err != nil {
			t.Fatal(err)
		}
		declared, err := DeclareQueue(conn, q, amqp.Table{"x-dead-letter-exchange": "elsewhere"})
		if err != nil || declared {
			t.Fatalf("DeclareQueue = %v, %v; want false, nil", declared, err)
		}
	})
	t.Run("EmptyName", func(t *testing.T) {
		if _, err := DeclareQueue(conn, "", nil); err == nil {
			t.Error("DeclareQueue accepted an empty name")
		}
	})
}
