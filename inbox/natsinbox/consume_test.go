package natsinbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// A producer's retry with the same key within the stream's duplicate
// window is dropped by the stream; one after the window is stored again,
// and the inbox drops it: the effect happens once either way.
func TestDuplicatePublish(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, kind string) {
		_, js := natstest.Connect(t)
		r := newRig(t, js, jetstream.StreamConfig{Duplicates: 500 * time.Millisecond}, jetstream.ConsumerConfig{})
		l := newLedger(t, kind)
		ib, rec := newInbox(t, l, inbox.Config{})

		within, late := key(t, 1), key(t, 2)
		if r.publish(t, within, 100) {
			t.Fatal("the first publish was taken for a duplicate")
		}
		if !r.publish(t, within, 100) {
			t.Fatal("a retry within the window was stored again, want PubAck.Duplicate")
		}
		if r.publish(t, late, 10) {
			t.Fatal("the first publish was taken for a duplicate")
		}
		// Past the window the server forgets the id (it purges on a
		// timer), and a retry is stored as a new message.
		deadline := time.Now().Add(20 * time.Second)
		for r.publish(t, late, 10) {
			if time.Now().After(deadline) {
				t.Fatal("the stream still drops the id 20 s after its 500 ms window")
			}
			time.Sleep(100 * time.Millisecond)
		}
		info, err := r.stream.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := info.State.Msgs, uint64(3); got != want {
			t.Fatalf("stream holds %d messages, want %d (one of %s, two of %s)", got, want, within, late)
		}

		consume(t, r.cons, ib, apply, nil)
		rec.waitFor(t, 30*time.Second, "2 applied, 1 duplicate", func() bool {
			return rec.count(inbox.Applied) == 2 && rec.count(inbox.Duplicate) == 1
		})
		settled(t, r.cons, 30*time.Second)
		l.checkOnce(t, map[string]int64{within: 100, late: 10})
	})
}

// A handler that fails is rolled back and its message delivered again
// after Config.Backoff, with the delivery count as Attempt, until it
// succeeds.
func TestFailThenSucceed(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, kind string) {
		_, js := natstest.Connect(t)
		r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{})
		l := newLedger(t, kind)
		ib, rec := newInbox(t, l, inbox.Config{})

		var (
			mu       sync.Mutex
			attempts []int
			backoffs []int
		)
		flaky := func(ctx context.Context, m *inbox.Message) error {
			mu.Lock()
			attempts = append(attempts, m.Attempt)
			mu.Unlock()
			// The effect is written, then the handler fails: the
			// rollback must undo it.
			if err := apply(ctx, m); err != nil {
				return err
			}
			if m.Attempt < 3 {
				return errors.New("the downstream is not ready yet")
			}
			return nil
		}
		backoff := func(attempt int) time.Duration {
			mu.Lock()
			backoffs = append(backoffs, attempt)
			mu.Unlock()
			return 100 * time.Millisecond
		}
		k := key(t, 1)
		r.publish(t, k, 7)
		consume(t, r.cons, ib, flaky, &natsinbox.Config{Backoff: backoff})
		rec.waitFor(t, 30*time.Second, "applied", func() bool { return rec.count(inbox.Applied) == 1 })
		settled(t, r.cons, 30*time.Second)
		l.checkOnce(t, map[string]int64{k: 7})

		mu.Lock()
		defer mu.Unlock()
		if got, want := attempts, []int{1, 2, 3}; !slices.Equal(got, want) {
			t.Errorf("attempts = %v, want %v", got, want)
		}
		if got, want := backoffs, []int{1, 2}; !slices.Equal(got, want) {
			t.Errorf("Backoff called for attempts %v, want %v", got, want)
		}
		if got := rec.count(inbox.Retry); got != 2 {
			t.Errorf("%d retries, want 2", got)
		}
	})
}

// Several Consume calls, on separate connections, share one durable
// consumer. Some business ids are published twice under different
// Nats-Msg-Ids (a producer without stable ids), which the stream cannot
// drop; the inbox, keyed by the id in the body (Config.MessageID), applies
// each once, even when two consumers hold the two copies at once.
func TestSeveralConsumers(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, kind string) {
		_, js := natstest.Connect(t)
		r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{})
		l := newLedger(t, kind)
		ib, rec := newInbox(t, l, inbox.Config{})

		const n = 120
		amounts := map[string]int64{}
		copies := 0
		for i := range n {
			ref := key(t, i)
			amounts[ref] = int64(i + 1)
			r.publish(t, ref, int64(i+1))
			copies++
			if i%3 == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if _, err := natsinbox.Publish(ctx, js, r.subject, body(ref, int64(i+1)), ref+"-again"); err != nil {
					t.Fatal(err)
				}
				cancel()
				copies++
			}
		}
		cfg := &natsinbox.Config{MessageID: refID, Backoff: fastBackoff, Prefetch: 4}
		for range 3 {
			_, js := natstest.Connect(t)
			cons, err := js.Consumer(context.Background(), r.stream.CachedInfo().Config.Name, "idem")
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				consume(t, cons, ib, apply, cfg)
			}
		}
		rec.waitFor(t, 60*time.Second, "every copy settled", func() bool {
			return rec.count(inbox.Applied)+rec.count(inbox.Duplicate) == copies
		})
		settled(t, r.cons, 30*time.Second)
		if got := rec.count(inbox.Applied); got != n {
			t.Errorf("%d applied, want %d", got, n)
		}
		l.checkOnce(t, amounts)
	})
}

// refID takes the message id from the body's business id.
func refID(msg jetstream.Msg) (string, error) {
	var tr transfer
	if err := json.Unmarshal(msg.Data(), &tr); err != nil {
		return "", err
	}
	return tr.Ref, nil
}

// A message the handler refuses is settled: acked, recorded (so that a
// copy is a Duplicate), counted, never delivered again.
func TestRefusedIsSettled(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, kind string) {
		_, js := natstest.Connect(t)
		r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: time.Second})
		l := newLedger(t, kind)
		ib, rec := newInbox(t, l, inbox.Config{})

		ctx := context.Background()
		bad := key(t, 1)
		if _, err := natsinbox.Publish(ctx, js, r.subject, []byte("not json"), bad); err != nil {
			t.Fatal(err)
		}
		good := key(t, 2)
		r.publish(t, good, 5)
		var calls atomic.Int64
		counting := func(ctx context.Context, m *inbox.Message) error {
			calls.Add(1)
			return apply(ctx, m)
		}
		consume(t, r.cons, ib, counting, &natsinbox.Config{Backoff: fastBackoff})
		rec.waitFor(t, 30*time.Second, "refused and applied", func() bool {
			return rec.count(inbox.Refused) == 1 && rec.count(inbox.Applied) == 1
		})
		info := settled(t, r.cons, 30*time.Second)
		// Had the refusal been left unacknowledged, it would come back
		// after the 1 s AckWait.
		time.Sleep(2500 * time.Millisecond)
		if got := calls.Load(); got != 2 {
			t.Errorf("the handler ran %d times, want 2", got)
		}
		if info.NumRedelivered != 0 {
			t.Errorf("%d messages redelivered, want 0", info.NumRedelivered)
		}
		l.checkOnce(t, map[string]int64{good: 5})
	})
}

// A message whose handler fails MaxAttempts times is dead-lettered: copied
// to the dead-letter subject with the reason, terminated, never delivered
// again; nothing of it commits.
func TestDeadLetterAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, kind string) {
		_, js := natstest.Connect(t)
		r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: time.Second})
		dl := natstest.Stream(t, js, jetstream.StreamConfig{})
		dlSubject := natstest.Subject(dl, "dead")
		l := newLedger(t, kind)
		ib, rec := newInbox(t, l, inbox.Config{MaxAttempts: 3})

		var calls atomic.Int64
		failing := func(ctx context.Context, m *inbox.Message) error {
			calls.Add(1)
			if err := apply(ctx, m); err != nil {
				return err
			}
			return errors.New("always broken")
		}
		k := key(t, 1)
		r.publish(t, k, 3)
		consume(t, r.cons, ib, failing, &natsinbox.Config{Backoff: fastBackoff, DeadLetter: natsinbox.RepublishTo(js, dlSubject)})
		rec.waitFor(t, 30*time.Second, "dead letter", func() bool { return rec.count(inbox.DeadLetter) == 1 })
		settled(t, r.cons, 30*time.Second)
		// A Term the server ignored (as servers before 2.10.4 ignore
		// TermWithReason) would bring the message back after the 1 s
		// AckWait.
		time.Sleep(2500 * time.Millisecond)
		if got := calls.Load(); got != 3 {
			t.Errorf("the handler ran %d times, want 3", got)
		}
		l.checkOnce(t, map[string]int64{})

		cons, err := dl.OrderedConsumer(context.Background(), jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("no copy on the dead-letter subject: %v", err)
		}
		h := msg.Headers()
		if got := h.Get(jetstream.MsgIDHeader); got != k {
			t.Errorf("copy's Nats-Msg-Id = %q, want %q", got, k)
		}
		if got := h.Get(natsinbox.DeadLetterReasonHeader); !strings.Contains(got, "always broken") {
			t.Errorf("copy's reason = %q, want the handler's error", got)
		}
		if got, want := h.Get(natsinbox.DeadLetterStreamHeader), r.stream.CachedInfo().Config.Name; got != want {
			t.Errorf("copy's stream = %q, want %q", got, want)
		}
		if got := h.Get(natsinbox.DeadLetterSequenceHeader); got != "1" {
			t.Errorf("copy's sequence = %q, want 1", got)
		}
		if got := h.Get(natsinbox.DeadLetterSubjectHeader); got != r.subject {
			t.Errorf("copy's subject = %q, want %q", got, r.subject)
		}
		if string(msg.Data()) != string(body(k, 3)) {
			t.Errorf("copy's body = %s, want the message's", msg.Data())
		}
	})
}

// A message without Nats-Msg-Id is dead-lettered (terminated, its
// handler never run) by default, and named by its stream sequence with
// Config.FallbackToSequence.
func TestMessageWithoutID(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	l := newLedger(t, sqlite)
	for _, fallback := range []bool{false, true} {
		r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: time.Second})
		ib, rec := newInbox(t, l, inbox.Config{Name: fmt.Sprintf("fallback-%v", fallback)})
		if _, err := js.Publish(context.Background(), r.subject, body("", 1)); err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int64
		counting := func(ctx context.Context, m *inbox.Message) error {
			calls.Add(1)
			return apply(ctx, m)
		}
		stop := consume(t, r.cons, ib, counting, &natsinbox.Config{FallbackToSequence: fallback})
		if fallback {
			rec.waitFor(t, 30*time.Second, "applied", func() bool { return rec.count(inbox.Applied) == 1 })
		}
		info := settled(t, r.cons, 30*time.Second)
		// A message left unacknowledged would come back after the 1 s
		// AckWait.
		time.Sleep(2500 * time.Millisecond)
		stop()
		want := int64(0)
		if fallback {
			want = 1
		}
		if got := calls.Load(); got != want {
			t.Errorf("FallbackToSequence=%v: the handler ran %d times, want %d", fallback, got, want)
		}
		if info.NumRedelivered != 0 {
			t.Errorf("FallbackToSequence=%v: %d redelivered, want 0", fallback, info.NumRedelivered)
		}
		for _, e := range rec.all() {
			if e.Outcome != map[bool]inbox.Outcome{false: inbox.DeadLetter, true: inbox.Applied}[fallback] {
				t.Errorf("FallbackToSequence=%v: event %+v", fallback, e)
			}
		}
	}
	// The one applied message is named after its stream and sequence.
	effects, _ := l.audit(t)
	if len(effects) != 1 {
		t.Fatalf("effects = %v, want one", effects)
	}
	for id := range effects {
		if !strings.HasPrefix(id, "T_") || !strings.HasSuffix(id, ":1") {
			t.Errorf("message id = %q, want <stream>:1", id)
		}
	}
}

// While a slow handler runs, the adapter keeps its message in progress:
// the server does not deliver it to another consumer when AckWait runs
// out.
func TestSlowHandlerKeepsItsMessage(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: time.Second})
	l := newLedger(t, sqlite)
	ib, rec := newInbox(t, l, inbox.Config{})
	var calls atomic.Int64
	slow := func(ctx context.Context, m *inbox.Message) error {
		calls.Add(1)
		select {
		case <-time.After(3500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return apply(ctx, m)
	}
	k := key(t, 1)
	r.publish(t, k, 1)
	// Two consumers: a redelivery would reach the idle one.
	consume(t, r.cons, ib, slow, nil)
	consume(t, r.cons, ib, slow, nil)
	rec.waitFor(t, 30*time.Second, "applied", func() bool { return rec.count(inbox.Applied) == 1 })
	info := settled(t, r.cons, 30*time.Second)
	if got := calls.Load(); got != 1 {
		t.Errorf("the handler ran %d times, want 1", got)
	}
	if info.NumRedelivered != 0 || len(rec.all()) != 1 {
		t.Errorf("redelivered %d, events %+v; want none redelivered and one event", info.NumRedelivered, rec.all())
	}
	l.checkOnce(t, map[string]int64{k: 1})
}

// When its context ends, Consume hands the messages it had received but
// not begun, and the one in hand, back to the server at once: the other
// consumer gets them well before AckWait.
func TestStopHandsBackPrefetched(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: time.Minute})
	l := newLedger(t, sqlite)
	ib, rec := newInbox(t, l, inbox.Config{})
	const n = 10
	amounts := map[string]int64{}
	for i := range n {
		k := key(t, i)
		amounts[k] = 1
		r.publish(t, k, 1)
	}
	started := make(chan struct{})
	var once sync.Once
	blocking := func(ctx context.Context, m *inbox.Message) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return ctx.Err()
	}
	// A takes all n (Prefetch 16) and blocks on the first; B waits.
	stopA := consume(t, r.cons, ib, blocking, nil)
	<-started
	consume(t, r.cons, ib, apply, nil)
	time.Sleep(200 * time.Millisecond) // B's pull request reaches the server
	start := time.Now()
	stopA()
	rec.waitFor(t, 30*time.Second, "all applied", func() bool { return rec.count(inbox.Applied) == n })
	settled(t, r.cons, 30*time.Second)
	if d := time.Since(start); d > 45*time.Second {
		t.Errorf("the messages came back after %s, as if left to the 1 min AckWait", d)
	}
	l.checkOnce(t, amounts)
}

// Consume refuses a consumer on which the inbox cannot keep its promises,
// naming what is wrong.
func TestConsumeRefusesConsumer(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	l := newLedger(t, sqlite)
	ib, _ := newInbox(t, l, inbox.Config{MaxAttempts: 5})
	for _, tc := range []struct {
		name string
		cfg  jetstream.ConsumerConfig
		want string
	}{
		{"AckNone", jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy}, "explicit acks"},
		{"AckAll", jetstream.ConsumerConfig{AckPolicy: jetstream.AckAllPolicy}, "explicit acks"},
		{"MaxDeliverBelowMaxAttempts", jetstream.ConsumerConfig{MaxDeliver: 4}, "MaxDeliver"},
		{"MaxDeliverAtMaxAttempts", jetstream.ConsumerConfig{MaxDeliver: 5}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, js, jetstream.StreamConfig{}, tc.cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := natsinbox.Consume(ctx, r.cons, ib, apply, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Consume = %v, want nil once ctx ends", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Consume = %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// Consume returns an error, rather than wait for ever, when its consumer
// is deleted.
func TestConsumeEndsWhenConsumerDeleted(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{})
	l := newLedger(t, sqlite)
	ib, _ := newInbox(t, l, inbox.Config{})
	done := make(chan error, 1)
	go func() { done <- natsinbox.Consume(context.Background(), r.cons, ib, apply, nil) }()
	time.Sleep(500 * time.Millisecond) // let it pull
	if err := r.stream.DeleteConsumer(context.Background(), "idem"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("Consume returned nil after its consumer was deleted")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Consume still runs 60 s after its consumer was deleted")
	}
}

// With DoubleAck, Handle returns once the server has the ack: nothing is
// left unacknowledged.
func TestHandleDoubleAck(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	r := newRig(t, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: time.Minute})
	l := newLedger(t, sqlite)
	ib, _ := newInbox(t, l, inbox.Config{})
	k := key(t, 1)
	r.publish(t, k, 4)
	msg, err := r.cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	o, err := natsinbox.Handle(context.Background(), ib, msg, apply, &natsinbox.Config{DoubleAck: true})
	if o != inbox.Applied || err != nil {
		t.Fatalf("Handle = %s, %v; want applied, nil", o, err)
	}
	info, err := r.cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 {
		t.Errorf("%d unacknowledged right after a double ack, want 0", info.NumAckPending)
	}
	l.checkOnce(t, map[string]int64{k: 4})
}
