package amqpinbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/amqptest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// waitTimeout bounds every wait of these tests: generous, since the
// machine is shared and loaded.
const waitTimeout = 90 * time.Second

// fixture is a queue with a dead-letter queue on the test broker, a ledger
// and an inbox over it.
type fixture struct {
	t      *testing.T
	url    string
	db     *ledger
	queue  string
	dlq    string
	conn   *amqp.Connection
	pub    *amqp.Channel
	ib     *inbox.Inbox
	seen   *outcomes
	amount map[string]int64 // what was published, by id
}

// setup declares a queue of the given type (quorum or classic) that
// dead-letters to a queue of its own, and an inbox on db that allows
// maxAttempts deliveries.
func setup(t *testing.T, db *ledger, queueType string, maxAttempts int) *fixture {
	t.Helper()
	url := amqptest.Require(t)
	conn := amqptest.Dial(t)
	f := &fixture{
		t: t, url: url, db: db, conn: conn,
		queue:  amqptest.Name(t, "q"),
		dlq:    amqptest.Name(t, "dlq"),
		seen:   newOutcomes(),
		amount: map[string]int64{},
	}
	if _, err := DeclareQueue(conn, f.dlq, amqp.Table{"x-queue-type": queueType}); err != nil {
		t.Fatal(err)
	}
	if _, err := DeclareQueue(conn, f.queue, amqp.Table{
		"x-queue-type":              queueType,
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": f.dlq,
	}); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.pub, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	if db != nil {
		if f.ib, err = inbox.New(db.store, &inbox.Config{Name: "transfers", MaxAttempts: maxAttempts, Observer: f.seen.observe}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// publish publishes a transfer of amount with id, through Publish.
func (f *fixture) publish(id string, amount int64) {
	f.t.Helper()
	body, _ := json.Marshal(transferBody{Amount: amount})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := Publish(ctx, f.pub, "", f.queue, amqp.Publishing{ContentType: "application/json", Body: body}, id); err != nil {
		f.t.Fatal(err)
	}
	if amount > 0 {
		f.amount[id] = amount
	}
}

// run runs a Consumer of f.queue with h (the ledger's transfer when nil)
// until the returned stop is called; stop fails the test unless Run
// returned nil.
func (f *fixture) run(cfg *Config, h inbox.Handler, url string) (stop func()) {
	f.t.Helper()
	if h == nil {
		h = f.db.transfer
	}
	if url == "" {
		url = f.url
	}
	c, err := New(f.ib, h, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, url, f.queue) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					f.t.Errorf("Run: %v", err)
				}
			case <-time.After(waitTimeout):
				f.t.Errorf("Run did not return %s after its context ended", waitTimeout)
			}
		})
	}
	f.t.Cleanup(stop)
	return stop
}

// depth returns how many messages of queue are ready (not counting those
// delivered and not yet settled).
func (f *fixture) depth(queue string) int {
	f.t.Helper()
	ch, err := f.conn.Channel()
	if err != nil {
		f.t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return q.Messages
}

// drain takes every message ready in queue.
func (f *fixture) drain(queue string) []amqp.Delivery {
	f.t.Helper()
	ch, err := f.conn.Channel()
	if err != nil {
		f.t.Fatal(err)
	}
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			f.t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outcomes counts the inbox's outcomes.
type outcomes struct {
	mu sync.Mutex
	n  map[inbox.Outcome]int
}

func newOutcomes() *outcomes { return &outcomes{n: map[inbox.Outcome]int{}} }

func (o *outcomes) observe(e inbox.Event) {
	o.mu.Lock()
	o.n[e.Outcome]++
	o.mu.Unlock()
}

func (o *outcomes) get(x inbox.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[x]
}

func (o *outcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.n)
}
