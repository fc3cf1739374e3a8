package natsinbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/nats-io/nats.go/jetstream"
)

// The databases every effect-counting test runs on.
const (
	postgres = "Postgres"
	sqlite   = "SQLite"
)

// forEachDB runs f as a parallel subtest on PostgreSQL and on SQLite.
func forEachDB(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range []string{postgres, sqlite} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, kind)
		})
	}
}

// ledger is a small bank in the test's database: one balance, and one
// effect row per applied message, so that a message applied twice shows.
type ledger struct {
	kind  string
	where string // the PostgreSQL DSN or the SQLite path, for child processes
	store idem.Store
	close func()
}

const ledgerSchema = `
CREATE TABLE balance (id TEXT PRIMARY KEY, amount BIGINT NOT NULL);
CREATE TABLE effects (message_id TEXT NOT NULL, amount BIGINT NOT NULL);
INSERT INTO balance VALUES ('total', 0);`

// newLedger creates a fresh database of kind with the ledger's tables and
// opens it; it is closed at clean-up.
func newLedger(t testing.TB, kind string) *ledger {
	t.Helper()
	var where string
	if kind == postgres {
		_, where = pgtest.Schema(t)
	} else {
		where = filepath.Join(t.TempDir(), "ledger.db")
	}
	l := openLedger(t, kind, where)
	if err := l.exec(context.Background(), ledgerSchema); err != nil {
		t.Fatal(err)
	}
	return l
}

// openLedger opens an existing ledger; it is closed at clean-up.
func openLedger(t testing.TB, kind, where string) *ledger {
	t.Helper()
	ctx := context.Background()
	l := &ledger{kind: kind, where: where}
	if kind == postgres {
		s, err := pgstore.Open(ctx, where, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.store, l.close = s, func() { _ = s.Close() }
	} else {
		s, err := sqlitestore.Open(ctx, where, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.store, l.close = s, func() { _ = s.Close() }
	}
	var once sync.Once
	closeOnce := l.close
	l.close = func() { once.Do(closeOnce) }
	t.Cleanup(l.close)
	return l
}

// exec runs statements outside any transaction.
func (l *ledger) exec(ctx context.Context, q string) error {
	if s, ok := l.store.(*pgstore.Store); ok {
		_, err := s.Pool().Exec(ctx, q)
		return err
	}
	_, err := l.store.(*sqlitestore.Store).DB().ExecContext(ctx, q)
	return err
}

// execTx runs one statement in the inbox's transaction that ctx carries.
func execTx(ctx context.Context, q string, args ...any) error {
	if tx, ok := pgstore.TxFrom(ctx); ok {
		_, err := tx.Exec(ctx, q, args...)
		return err
	}
	if tx, ok := sqlitestore.TxFrom(ctx); ok {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}
	return errors.New("no store transaction in the context")
}

// transfer is a message body: an amount to add to the balance, and a
// business id for the tests that take the message id from the body.
type transfer struct {
	Ref    string `json:"ref,omitempty"`
	Amount int64  `json:"amount"`
}

func body(ref string, amount int64) []byte {
	b, _ := json.Marshal(transfer{Ref: ref, Amount: amount})
	return b
}

// apply is the handler: it adds the amount and records the effect, in the
// inbox's transaction. A body that is not a transfer is refused.
func apply(ctx context.Context, m *inbox.Message) error {
	var tr transfer
	if err := json.Unmarshal(m.Body, &tr); err != nil {
		return inbox.Refuse(err)
	}
	if err := execTx(ctx, `INSERT INTO effects (message_id, amount) VALUES ($1, $2)`, m.ID, tr.Amount); err != nil {
		return err
	}
	return execTx(ctx, `UPDATE balance SET amount = amount + $1 WHERE id = 'total'`, tr.Amount)
}

// audit returns how many effects each message id has, and the balance.
func (l *ledger) audit(t testing.TB) (effects map[string]int, balance int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	effects = map[string]int{}
	const q = `SELECT message_id, count(*) FROM effects GROUP BY message_id`
	const qb = `SELECT amount FROM balance WHERE id = 'total'`
	if s, ok := l.store.(*pgstore.Store); ok {
		rows, err := s.Pool().Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			effects[id] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Pool().QueryRow(ctx, qb).Scan(&balance); err != nil {
			t.Fatal(err)
		}
		return effects, balance
	}
	db := l.store.(*sqlitestore.Store).DB()
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		effects[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, qb).Scan(&balance); err != nil {
		t.Fatal(err)
	}
	return effects, balance
}

// checkOnce fails the test unless each of ids has exactly one effect, no
// other id has any, and the balance is their sum.
func (l *ledger) checkOnce(t testing.TB, amounts map[string]int64) {
	t.Helper()
	effects, balance := l.audit(t)
	var want int64
	for id, a := range amounts {
		want += a
		if effects[id] != 1 {
			t.Errorf("message %q took effect %d times, want 1", id, effects[id])
		}
	}
	for id, n := range effects {
		if _, ok := amounts[id]; !ok {
			t.Errorf("message %q took effect %d times, want 0", id, n)
		}
	}
	if balance != want {
		t.Errorf("balance = %d, want %d", balance, want)
	}
}

// recorder collects the inbox's events, as an Observer.
type recorder struct {
	mu     sync.Mutex
	events []inbox.Event
	change chan struct{}
}

func newRecorder() *recorder { return &recorder{change: make(chan struct{}, 1)} }

func (r *recorder) observe(e inbox.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.change <- struct{}{}:
	default:
	}
}

// count returns how many events had outcome o.
func (r *recorder) count(o inbox.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Outcome == o {
			n++
		}
	}
	return n
}

func (r *recorder) all() []inbox.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]inbox.Event(nil), r.events...)
}

// waitFor waits until cond holds, or fails the test after d.
func (r *recorder) waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-r.change:
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("after %s, still waiting for %s; events: %+v", d, what, r.all())
		}
	}
}

// newInbox returns an inbox on l's store, named for the test, whose events
// go to a new recorder.
func newInbox(t testing.TB, l *ledger, cfg inbox.Config) (*inbox.Inbox, *recorder) {
	t.Helper()
	rec := newRecorder()
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	cfg.Observer = rec.observe
	ib, err := inbox.New(l.store, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ib, rec
}

// rig is a stream with a durable consumer on the shared server.
type rig struct {
	js      jetstream.JetStream
	stream  jetstream.Stream
	subject string
	cons    jetstream.Consumer
}

// newRig creates a stream from scfg (a fresh name and subject when empty)
// and a durable consumer from ccfg: explicit acks (the zero AckPolicy),
// AckWait 2 s and unlimited deliveries unless set.
func newRig(t testing.TB, js jetstream.JetStream, scfg jetstream.StreamConfig, ccfg jetstream.ConsumerConfig) *rig {
	t.Helper()
	s := natstest.Stream(t, js, scfg)
	r := &rig{js: js, stream: s, subject: natstest.Subject(s, "transfers")}
	if ccfg.Durable == "" {
		ccfg.Durable = "idem"
	}
	if ccfg.AckWait == 0 {
		ccfg.AckWait = 2 * time.Second
	}
	if ccfg.MaxDeliver == 0 {
		ccfg.MaxDeliver = -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := s.CreateOrUpdateConsumer(ctx, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	r.cons = cons
	return r
}

// publish publishes one transfer with key as its Nats-Msg-Id and reports
// whether the stream dropped it as a duplicate.
func (r *rig) publish(t testing.TB, key string, amount int64) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ack, err := natsinbox.Publish(ctx, r.js, r.subject, body(key, amount), key)
	if err != nil {
		t.Fatalf("publish %s: %v", key, err)
	}
	return ack.Duplicate
}

// consume runs natsinbox.Consume in a goroutine until the returned stop
// is called (also at clean-up), and fails the test if Consume returns an
// error.
func consume(t testing.TB, cons jetstream.Consumer, ib *inbox.Inbox, h inbox.Handler, cfg *natsinbox.Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- natsinbox.Consume(ctx, cons, ib, h, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Consume: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// settled waits until the consumer has nothing pending or unacknowledged,
// or fails the test after d.
func settled(t testing.TB, cons jetstream.Consumer, d time.Duration) *jetstream.ConsumerInfo {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := cons.Info(ctx)
		cancel()
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			return info
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("consumer info: %v", err)
			}
			t.Fatalf("after %s the consumer has %d pending and %d unacknowledged messages", d, info.NumPending, info.NumAckPending)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func fastBackoff(int) time.Duration { return 50 * time.Millisecond }

func key(t testing.TB, i int) string { return fmt.Sprintf("%s-%d", natstest.Name(t), i) }
