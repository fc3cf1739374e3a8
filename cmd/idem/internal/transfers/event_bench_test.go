package transfers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/natsoutbox"
	"github.com/idemkit/idem/pgstore"
	"github.com/nats-io/nats.go/jetstream"
)

// benchPostgres opens a pgstore in a fresh schema with 64 funded accounts,
// and the inbox the benchmarks apply transfers through.
func benchPostgres(b *testing.B) (*pgstore.Store, *Database, *inbox.Inbox) {
	_, dsn := pgtest.Schema(b)
	ctx := context.Background()
	store, err := pgstore.Open(ctx, dsn+"&pool_max_conns=16", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	db := Postgres(store)
	if err := db.migrate(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range 64 {
		if _, err := db.pool.exec(ctx, `INSERT INTO accounts (id, balance) VALUES ($1, $2)`, fmt.Sprint("acct-", i), int64(1)<<50); err != nil {
			b.Fatal(err)
		}
	}
	ib, err := inbox.New(store, &inbox.Config{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return store, db, ib
}

var benchSeq atomic.Int64

func benchMessage(rng *rand.Rand) *inbox.Message {
	from := rng.IntN(64)
	to := (from + 1 + rng.IntN(63)) % 64
	body := fmt.Sprintf(`{"from":"acct-%d","to":"acct-%d","amount":1}`, from, to)
	return &inbox.Message{ID: fmt.Sprint("msg-", benchSeq.Add(1)), Body: []byte(body), Attempt: 1}
}

// BenchmarkEventRatio applies transfers through the inbox on PostgreSQL
// with Config.Events (each transfer stages its event with outbox.Stage in
// its transaction) and without, alternating in rounds of 100 transfers per
// variant at 8 concurrent workers, and reports the throughput ratio
// events/plain: what staging one event costs a transfer. Nothing relays
// the events meanwhile. Run it with a small -benchtime (for example 20x).
func BenchmarkEventRatio(b *testing.B) {
	const perRound, conc = 100, 8
	ctx := context.Background()
	_, db, ib := benchPostgres(b)
	plain, err := New(ctx, db, &Config{RequestTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	withEvents := &Service{db: plain.db, cfg: plain.cfg, slots: plain.slots}
	withEvents.cfg.Events = true
	round := func(s *Service) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := range conc {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(benchSeq.Load())))
				for next.Add(1) <= perRound {
					if o, err := ib.Process(ctx, benchMessage(rng), s.ApplyMessage); o != inbox.Applied {
						b.Errorf("inbox: %s %v", o, err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	benchpair.Ratio(b, perRound, "transfers",
		benchpair.Variant{Name: "plain", Round: func() time.Duration { return round(plain) }},
		benchpair.Variant{Name: "events", Round: func() time.Duration { return round(withEvents) }})
}

// lagPublisher records, per message id of the command a transfer was made
// from, when the broker confirmed its event.
type lagPublisher struct {
	outbox.Publisher
	mu        sync.Mutex
	confirmed map[string]time.Time
}

func (p *lagPublisher) Publish(ctx context.Context, e outbox.Envelope) error {
	err := p.Publisher.Publish(ctx, e)
	if err == nil {
		at := time.Now()
		var ev Event
		if json.Unmarshal(e.Body, &ev) != nil {
			return errors.New("lagPublisher: an event body that is not an Event")
		}
		p.mu.Lock()
		if _, ok := p.confirmed[ev.MessageID]; !ok {
			p.confirmed[ev.MessageID] = at
		}
		p.mu.Unlock()
	}
	return err
}

// BenchmarkEventLag applies transfers at 500 per second (one every 2 ms,
// 4 workers) on PostgreSQL with Config.Events while a relay (woken by
// LISTEN/NOTIFY) publishes the events to a JetStream stream, and reports
// the lag from each transfer's commit to its event's PubAck: p50, p99 and
// max in ms. b.N is the number of transfers (-benchtime 2500x is 5 s).
func BenchmarkEventLag(b *testing.B) {
	ctx := context.Background()
	store, db, ib := benchPostgres(b)
	s, err := New(ctx, db, &Config{RequestTimeout: time.Minute, Events: true})
	if err != nil {
		b.Fatal(err)
	}
	_, js := natstest.Connect(b)
	stream := natstest.Stream(b, js, jetstream.StreamConfig{})
	np, err := natsoutbox.New(js, &natsoutbox.Config{Stream: stream.CachedInfo().Config.Name, Subject: natstest.Subject(stream, "created")})
	if err != nil {
		b.Fatal(err)
	}
	// Publish only (not PublishBatch): each confirm is timed on its own.
	pub := &lagPublisher{Publisher: np, confirmed: map[string]time.Time{}}
	src := store.Outbox()
	defer src.Close()
	relayCtx, stop := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		_ = outbox.NewRelay(src, pub, nil).Run(relayCtx)
	}()

	var mu sync.Mutex
	committed := map[string]time.Time{}
	apply := func(ctx context.Context, m *inbox.Message) error { return s.ApplyMessage(ctx, m) }
	b.ResetTimer()
	tick := time.NewTicker(2 * time.Millisecond)
	var next atomic.Int64
	var wg sync.WaitGroup
	work := make(chan struct{}, 64)
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for range work {
				m := benchMessage(rng)
				if o, err := ib.Process(ctx, m, apply); o != inbox.Applied {
					b.Errorf("inbox: %s %v", o, err)
					continue
				}
				mu.Lock()
				committed[m.ID] = time.Now()
				mu.Unlock()
			}
		})
	}
	for next.Add(1) <= int64(b.N) {
		<-tick.C
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	tick.Stop()
	// Wait for the last confirms, at most 30 s.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pub.mu.Lock()
		n := len(pub.confirmed)
		pub.mu.Unlock()
		if n >= b.N {
			break
		}
	}
	b.StopTimer()
	stop()
	<-relayDone
	pub.mu.Lock()
	defer pub.mu.Unlock()
	lags := make([]float64, 0, len(committed))
	for id, c := range committed {
		if at, ok := pub.confirmed[id]; ok {
			lags = append(lags, float64(max(at.Sub(c), 0))/float64(time.Millisecond))
		}
	}
	if len(lags) < b.N {
		b.Fatalf("%d of %d events confirmed", len(lags), b.N)
	}
	slices.Sort(lags)
	b.ReportMetric(lags[len(lags)/2], "p50-ms")
	b.ReportMetric(lags[len(lags)*99/100], "p99-ms")
	b.ReportMetric(lags[len(lags)-1], "max-ms")
}
