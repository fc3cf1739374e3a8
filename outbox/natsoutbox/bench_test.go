package natsoutbox_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/natsoutbox"
	"github.com/idemkit/idem/pgstore"
)

// stageBulk commits n messages on s, perMsgs per transaction (one Guard.Do
// each), on subject.
func stageBulk(b *testing.B, s idem.Store, subject string, n, per int) {
	b.Helper()
	g, err := idem.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	for k := 0; k*per < n; k++ {
		msgs := make([]outbox.Message, 0, per)
		for i := k * per; i < min(n, (k+1)*per); i++ {
			msgs = append(msgs, outbox.Message{Name: strconv.Itoa(i), Subject: subject, Body: []byte(`{"id":"` + strconv.Itoa(i) + `","amount":100}`)})
		}
		_, _, err := g.Do(context.Background(), idem.Request{Scope: "bench", Key: fmt.Sprint("b", k)}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 201}, outbox.Stage(ctx, msgs...)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRelayPublishRate stages b.N messages on PostgreSQL (untimed),
// then times one relay publishing them all to JetStream, a claim's batch
// in flight at once (100, the default, or 500). It reports events/s.
func BenchmarkRelayPublishRate(b *testing.B) {
	for _, batch := range []int{100, 500} {
		b.Run(fmt.Sprint("batch=", batch), func(b *testing.B) { benchRelayPublishRate(b, batch) })
	}
}

func benchRelayPublishRate(b *testing.B, batch int) {
	_, js := natstest.Connect(b)
	st := natstest.Stream(b, js, jetstream.StreamConfig{})
	name := st.CachedInfo().Config.Name
	_, dsn := pgtest.Schema(b)
	s, err := pgstore.Open(context.Background(), dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	stageBulk(b, s, natstest.Subject(st, "created"), b.N, 100)
	pub, _ := natsoutbox.New(js, &natsoutbox.Config{Stream: name})
	r := outbox.NewRelay(s.Outbox(), pub, &outbox.RelayConfig{BatchSize: batch})
	b.ResetTimer()
	start := time.Now()
	for {
		n, err := r.RunOnce(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	el := time.Since(start)
	b.StopTimer()
	if got := r.Stats().Published; got != uint64(b.N) {
		b.Fatalf("published %d of %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
}

// timingPublisher records when each message's confirm came back.
type timingPublisher struct {
	pub *natsoutbox.Publisher
	mu  sync.Mutex
	at  map[string]time.Time
}

func (p *timingPublisher) Publish(ctx context.Context, e outbox.Envelope) error {
	err := p.pub.Publish(ctx, e)
	p.record([]outbox.Envelope{e}, []error{err})
	return err
}

func (p *timingPublisher) PublishBatch(ctx context.Context, es []outbox.Envelope) []error {
	errs := p.pub.PublishBatch(ctx, es)
	p.record(es, errs)
	return errs
}

func (p *timingPublisher) record(es []outbox.Envelope, errs []error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range es {
		if errs[i] == nil {
			if _, ok := p.at[e.ID]; !ok {
				p.at[e.ID] = now
			}
		}
	}
}

// BenchmarkCommitToConfirmLag commits transfers at a fixed rate (at most 500/s,
// each staging one message, from 8 goroutines) on PostgreSQL for
// b.N transfers while one relay, woken by LISTEN/NOTIFY, publishes them
// to JetStream; it reports the p50, p99 and max lag from the commit's
// return to the broker's confirm.
func BenchmarkCommitToConfirmLag(b *testing.B) {
	const rate = 500
	_, js := natstest.Connect(b)
	st := natstest.Stream(b, js, jetstream.StreamConfig{})
	name := st.CachedInfo().Config.Name
	subject := natstest.Subject(st, "created")
	_, dsn := pgtest.Schema(b)
	s, err := pgstore.Open(context.Background(), dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g, _ := idem.New(s, nil)
	inner, _ := natsoutbox.New(js, &natsoutbox.Config{Stream: name})
	tp := &timingPublisher{pub: inner, at: map[string]time.Time{}}
	src := s.Outbox()
	defer src.Close()
	r := outbox.NewRelay(src, tp, &outbox.RelayConfig{BatchSize: 100})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	time.Sleep(100 * time.Millisecond) // the relay listens

	commits := make([]time.Time, b.N)
	ticks := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range ticks {
				_, _, err := g.Do(context.Background(), idem.Request{Scope: "lag", Key: fmt.Sprint("t", i)}, func(ctx context.Context) (idem.Result, error) {
					return idem.Result{Status: 201}, outbox.Stage(ctx, outbox.Message{Name: "created", Subject: subject, Body: []byte(strconv.Itoa(i))})
				})
				if err != nil {
					b.Error(err)
				}
				commits[i] = time.Now()
			}
		})
	}
	b.ResetTimer()
	began := time.Now()
	t := time.NewTicker(time.Second / rate)
	for i := range b.N {
		<-t.C
		ticks <- i
	}
	t.Stop()
	close(ticks)
	wg.Wait()
	achieved := float64(b.N) / time.Since(began).Seconds()
	deadline := time.Now().Add(time.Minute)
	for r.Stats().Published < uint64(b.N) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	cancel()
	<-done
	lags := make([]time.Duration, 0, b.N)
	tp.mu.Lock()
	for i := range b.N {
		at, ok := tp.at[outbox.ID("lag", fmt.Sprint("t", i), "created")]
		if !ok {
			b.Fatalf("transfer %d was not confirmed", i)
		}
		lags = append(lags, max(0, at.Sub(commits[i])))
	}
	tp.mu.Unlock()
	slices.Sort(lags)
	q := func(p float64) float64 { return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
	// The commits fall short of the rate when the database is slower:
	// the lag holds at the rate reached.
	b.ReportMetric(achieved, "transfers/s")
}
