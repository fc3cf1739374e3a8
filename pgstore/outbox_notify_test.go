package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore"
)

// chanPublisher confirms every message and hands its id over.
type chanPublisher chan string

func (p chanPublisher) Publish(ctx context.Context, e outbox.Envelope) error {
	p <- e.ID
	return nil
}

// A relay waiting on LISTEN is woken by the NOTIFY that follows a staging
// commit (sent outside the transaction, by the store's notifier): with a
// poll interval of a minute, each message still arrives within seconds.
func TestOutboxCommitWakesAListeningRelay(t *testing.T) {
	t.Parallel()
	s := openOutboxStore(t)
	pub := make(chanPublisher, 16)
	relay := outbox.NewRelay(outboxOf(t, s), pub, &outbox.RelayConfig{PollInterval: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The relay's first claim finds nothing; then it waits on LISTEN.
	time.Sleep(500 * time.Millisecond)
	for i, key := range []string{"n-1", "n-2", "n-3"} {
		start := time.Now()
		_, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: key}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 201}, outbox.Stage(ctx, outbox.Message{Name: "created", Subject: "t.created", Body: []byte(key)})
		})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-pub:
			if want := outbox.ID("s", key, "created"); id != want {
				t.Errorf("message %d: published %s, want %s", i, id, want)
			}
			t.Logf("message %d published %s after its commit", i, time.Since(start).Round(time.Millisecond))
		case <-time.After(20 * time.Second):
			t.Fatalf("message %d not published 20s after its commit: the relay was not woken (its poll interval is a minute)", i)
		}
	}
}

// Staged messages are written by Commit after the record: a work that
// fails after staging leaves nothing, and a message that cannot be written
// (headers that are not valid) fails Stage itself.
func TestOutboxStagedRowsCommitWithTheRecordOnly(t *testing.T) {
	t.Parallel()
	s := openOutboxStore(t)
	g, err := idem.New(s, &idem.Config{ReplayCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	boom := errors.New("boom")
	_, _, err = g.Do(ctx, idem.Request{Scope: "s", Key: "rolled-back"}, func(ctx context.Context) (idem.Result, error) {
		if err := outbox.Stage(ctx, outbox.Message{Name: "created", Subject: "t.created", Body: []byte("x")}); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{}, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	// A work that ends the transaction itself: its record fails, and so
	// do the messages staged before.
	_, _, err = g.Do(ctx, idem.Request{Scope: "s", Key: "ended"}, func(ctx context.Context) (idem.Result, error) {
		if err := outbox.Stage(ctx, outbox.Message{Name: "created", Subject: "t.created", Body: []byte("y")}); err != nil {
			return idem.Result{}, err
		}
		tx, _ := pgstore.TxFrom(ctx)
		if _, err := tx.Exec(ctx, "COMMIT"); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 201}, nil
	})
	if err == nil {
		t.Fatal("a work that committed the transaction itself was recorded")
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM idem_records_outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d outbox rows, want 0", n)
	}
}
