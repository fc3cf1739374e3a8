package natsinbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// On a three-node JetStream cluster, with a stream and its consumer
// replicated three times, consumers keep applying while the stream's
// leader is killed with SIGKILL and later restarted, and then the
// consumer's leader: every published message is applied exactly once,
// none is lost. The producer retries each publish with the same key until
// the stream acknowledges it.
func TestClusterNodeKilled(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	_, js := natstest.Dial(t, c.URL())
	name := natstest.Name(t)
	subject := name + ".transfers"
	var stream jetstream.Stream
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Replicas: 3})
		cancel()
		if err == nil {
			stream = s
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create a stream with 3 replicas: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "idem", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, postgres)
	ib, rec := newInbox(t, l, inbox.Config{})
	cfg := &natsinbox.Config{Backoff: fastBackoff}
	for range 2 {
		_, js := natstest.Dial(t, c.URL())
		cons, err := js.Consumer(ctx, name, "idem")
		if err != nil {
			t.Fatal(err)
		}
		consume(t, cons, ib, apply, cfg)
	}

	const n = 300
	var published atomic.Int64
	amounts := map[string]int64{}
	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("%s-%d", name, i)
		amounts[keys[i]] = int64(i%7 + 1)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, k := range keys {
			for try := 0; ; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := natsinbox.Publish(ctx, js, subject, body(k, amounts[k]), k)
				cancel()
				if err == nil {
					break
				}
				if try == 600 {
					t.Errorf("publish %s: still failing after %d tries: %v", k, try, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			published.Store(int64(i + 1))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitPublished := func(m int64) {
		t.Helper()
		for published.Load() < m {
			if t.Failed() {
				t.FailNow()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	leader := func(of string, info func(context.Context) (*jetstream.ClusterInfo, error)) int {
		t.Helper()
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ci, err := info(ctx)
			cancel()
			if err != nil || ci == nil {
				continue
			}
			for i := range c.Len() {
				if c.NodeName(i) == ci.Leader {
					return i
				}
			}
		}
		t.Fatalf("the %s has no leader after 60 s", of)
		return -1
	}
	streamLeader := func(ctx context.Context) (*jetstream.ClusterInfo, error) {
		si, err := stream.Info(ctx)
		if err != nil {
			return nil, err
		}
		return si.Cluster, nil
	}
	consumerLeader := func(ctx context.Context) (*jetstream.ClusterInfo, error) {
		ci, err := cons.Info(ctx)
		if err != nil {
			return nil, err
		}
		return ci.Cluster, nil
	}

	waitPublished(n / 5)
	victim := leader("stream", streamLeader)
	t.Logf("killing the stream leader, %s, after %d publishes", c.NodeName(victim), published.Load())
	c.Kill(victim)
	waitPublished(2 * n / 5)
	c.Start(victim)
	waitPublished(3 * n / 5)
	victim = leader("consumer", consumerLeader)
	t.Logf("killing the consumer leader, %s, after %d publishes", c.NodeName(victim), published.Load())
	c.Kill(victim)
	waitPublished(4 * n / 5)
	c.Start(victim)
	wg.Wait()
	if t.Failed() {
		return
	}

	rec.waitFor(t, 120*time.Second, fmt.Sprintf("%d applied", n), func() bool { return rec.count(inbox.Applied) == n })
	settled(t, cons, 60*time.Second)
	l.checkOnce(t, amounts)
	t.Logf("%d applied, %d duplicates answered, %d retries", rec.count(inbox.Applied), rec.count(inbox.Duplicate), rec.count(inbox.Retry))
}
