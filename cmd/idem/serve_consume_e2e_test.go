package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox/amqpinbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/internal/amqptest"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The end-to-end tests of idem serve -consume: the built binary, real
// brokers, real databases, SIGKILL. (That a killed consumer's
// unacknowledged messages are delivered again within 5 s is tested on the
// same consume sources by TestConsumeNATSRedeliversWithin5sOfAKill and
// TestConsumeAMQPRedeliversWithin5s.)

// idem serve -consume, on NATS JetStream and RabbitMQ, on SQLite and
// PostgreSQL: transfer commands are published (some twice, some refused)
// while the server is killed with SIGKILL and restarted three times, and
// a transfer is made over HTTP meanwhile. Once the stream or queue is
// drained, GET /transfers shows every accepted command applied exactly
// once, no refused one, the HTTP transfer once, and the balances the
// commands make, the money conserved.
func TestServeConsumeE2E(t *testing.T) {
	t.Parallel()
	for _, br := range []struct {
		name   string
		broker func(t *testing.T) *e2eBroker
	}{{"NATS", natsE2EBroker}, {"AMQP", amqpE2EBroker}} {
		t.Run(br.name, func(t *testing.T) {
			t.Parallel()
			for _, db := range []struct {
				name string
				dsn  func(t *testing.T) string
			}{
				{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "consume.db") }},
				{"Postgres", func(t *testing.T) string { _, dsn := pgtest.Schema(t); return dsn }},
				{"MySQL", func(t *testing.T) string { _, dsn := mysqltest.Database(t); return mysqltest.URL(t, dsn) }},
			} {
				t.Run(db.name, func(t *testing.T) {
					t.Parallel()
					consumeE2E(t, br.broker(t), db.dsn(t))
				})
			}
		})
	}
}

// e2eKillAfter is how many messages a server processes before it is
// killed.
const e2eKillAfter = 10

func consumeE2E(t *testing.T, b *e2eBroker, db string) {
	const kills = 3
	start := time.Now()
	p := newE2EPlan(e2eSeed(t), 5, 200, 18, kills+1)
	t.Logf("seed %d (IDEM_E2E_SEED=%d replays the plan)", p.seed, p.seed)
	r := &e2eRun{t: t, b: b, args: []string{"-db", db, "-consume", b.url, "-consume-queue", b.queue}}
	r.start()
	r.createAccounts(p)
	if b.prepare != nil {
		b.prepare(t)
	}
	viaHTTP := []e2eHTTPTransfer{{key: "http-1", from: "acct-3", to: "acct-4", amount: 77}}
	for i, seg := range p.segments {
		// Each server but the last is killed while the segment is being
		// published and consumed: the rest of the segment waits for the
		// next server, which starts with a backlog. (A server is
		// killed once it has processed e2eKillAfter messages.)
		published := r.publishAsync(seg)
		if i == len(p.segments)-1 {
			published()
			break
		}
		r.waitConsuming(e2eKillAfter)
		r.waitBacklog()
		r.kill()
		published()
		r.start()
		switch i {
		case 0: // the HTTP API works beside the consumer
			r.post(viaHTTP[0], false)
		case 1: // and its records outlive a kill
			r.post(viaHTTP[0], true)
		}
	}
	want := len(viaHTTP)
	for _, c := range p.cmds {
		if c.accepted {
			want++
		}
	}
	r.waitDrained(want)
	r.audit(p, viaHTTP)

	// The last server took every fresh message of the last segment:
	// its metrics count them by outcome.
	var fresh, freshRefused int
	for _, pub := range p.segments[len(p.segments)-1] {
		switch {
		case pub.dup:
		case pub.cmd.accepted:
			fresh++
		default:
			freshRefused++
		}
	}
	got := r.inboxCounts()
	if got["applied"] < fresh || got["refused"] < freshRefused || got["dead_letter"] != 0 {
		t.Errorf("the last server's idem_inbox_messages_total: %v; want applied >= %d, refused >= %d, dead_letter 0", got, fresh, freshRefused)
	}
	if b.lateWindow > 0 && r.lateStored == 0 {
		t.Errorf("no late copy reached the stream (%d dropped by its duplicate window): the inbox's own deduplication went untested", r.lateDropped)
	}
	if r.killedMidway == 0 {
		t.Errorf("no kill left messages to acknowledge: the server was never killed while it consumed")
	}
	r.finish(p, viaHTTP, want)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// natsE2EWindow is the duplicate window the NATS tests give the stream
// idem serve creates, shorter than the default 2 min, so that the late
// copies of a command reach the consumer, whose inbox must drop them.
const natsE2EWindow = 300 * time.Millisecond

// natsE2EBroker is the shared NATS server, with a fresh subject: idem
// serve creates its stream (deleted at clean-up).
func natsE2EBroker(t *testing.T) *e2eBroker {
	_, js := natstest.Connect(t)
	q := natsQueue(t, js)
	b := natsBroker(js, natstest.URL(), q, strings.ToUpper(q))
	b.lateWindow = natsE2EWindow
	b.prepare = func(t *testing.T) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, strings.ToUpper(q))
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		if cfg.Duplicates != 2*time.Minute {
			t.Errorf("the stream's duplicate window is %s, want the server's default 2m0s", cfg.Duplicates)
		}
		cfg.Duplicates = natsE2EWindow
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatalf("shorten the duplicate window: %v", err)
		}
	}
	return b
}

// natsBroker is a NATS server or cluster whose stream captures subject.
func natsBroker(js jetstream.JetStream, url, subject, stream string) *e2eBroker {
	return &e2eBroker{
		url: url, queue: subject,
		publish: func(ctx context.Context, id string, body []byte) (bool, error) {
			for try := 1; ; try++ {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				ack, err := natsinbox.Publish(pctx, js, subject, body, id)
				cancel()
				if err == nil {
					// After a failed try, a duplicate may be that
					// try's copy, stored.
					return !ack.Duplicate || try > 1, nil
				}
				if ctx.Err() != nil {
					return false, fmt.Errorf("%w (last try: %v)", ctx.Err(), err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		},
		exists: func(ctx context.Context) (bool, error) {
			_, err := js.Stream(ctx, stream)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return false, nil
			}
			return err == nil, err
		},
		pending: func(ctx context.Context) (int, error) {
			c, err := js.Consumer(ctx, stream, "idem-"+subject)
			if err != nil {
				return -1, err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return -1, err
			}
			return int(info.NumPending) + info.NumAckPending, nil
		},
	}
}

// amqpE2EBroker is the shared RabbitMQ broker, with a fresh queue: idem
// serve declares it and its dead-letter queue (both deleted at clean-up).
func amqpE2EBroker(t *testing.T) *e2eBroker {
	url := amqptest.Require(t)
	conn := amqptest.Dial(t)
	q := amqptest.Name(t, "e2e")
	t.Cleanup(func() { amqptest.Delete(t, url, q+amqpDeadSuffix) })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return &e2eBroker{
		url: url, queue: q,
		publish: func(ctx context.Context, id string, body []byte) (bool, error) {
			msg := amqp.Publishing{ContentType: "application/json", Body: body}
			return true, amqpinbox.Publish(ctx, ch, "", q, msg, id)
		},
		exists: func(context.Context) (bool, error) {
			n, err := amqpReady(conn, q)
			return n >= 0, err
		},
		pending: func(context.Context) (int, error) { return amqpReady(conn, q) },
		final: func(t *testing.T, log string) {
			t.Helper()
			// Refused messages are acknowledged, not dead-lettered.
			if n, err := amqpReady(conn, q+amqpDeadSuffix); n != 0 || err != nil {
				t.Errorf("dead-letter queue %s: %d messages (%v), want 0: %s\nthe last server's warnings:\n%s", q+amqpDeadSuffix, n, err, amqpPeek(conn, q+amqpDeadSuffix), e2eWarnings(log))
			}
		},
	}
}

// amqpPeek describes the messages ready in queue, taking them off it.
func amqpPeek(conn *amqp.Connection, queue string) string {
	ch, err := conn.Channel()
	if err != nil {
		return err.Error()
	}
	defer ch.Close()
	var out []string
	for range 20 {
		d, ok, err := ch.Get(queue, true)
		if err != nil || !ok {
			break
		}
		out = append(out, fmt.Sprintf("%s %v %s", d.MessageId, d.Headers, d.Body))
	}
	return strings.Join(out, "; ")
}

// amqpReady returns how many messages of queue are ready, or -1 if it does
// not exist.
func amqpReady(conn *amqp.Connection, queue string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return -1, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if e, ok := errors.AsType[*amqp.Error](err); ok && e.Code == amqp.NotFound {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	return q.Messages, nil
}

// On a JetStream cluster of three nodes, with the stream replicated on
// all three (created beforehand, as a cluster's operator does), idem
// serve -consume nats://a,nats://b,nats://c goes on consuming while the
// node leading its consumer is killed with SIGKILL, and after the node is
// restarted: every command applied exactly once, nothing lost.
func TestServeConsumeNATSClusterE2E(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := natstest.StartCluster(t, 3)
	nc, js := natstest.Dial(t, c.URL())
	q := strings.ToLower(natstest.Name(t))
	stream := strings.ToUpper(q)
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{q}, Replicas: 3})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("create a stream with 3 replicas: %v", err)
		}
	}
	b := natsBroker(js, c.URL(), q, stream)
	p := newE2EPlan(e2eSeed(t), 5, 150, 10, 5)
	t.Logf("seed %d (IDEM_E2E_SEED=%d replays the plan)", p.seed, p.seed)
	r := &e2eRun{t: t, b: b, args: []string{"-db", filepath.Join(t.TempDir(), "cluster.db"), "-consume", c.URL(), "-consume-queue", q}}
	r.start()
	r.createAccounts(p)
	viaHTTP := []e2eHTTPTransfer{{key: "http-1", from: "acct-0", to: "acct-1", amount: 5}}

	step := func(what string) { t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), what) }
	step("cluster, stream and server up")

	// Twice, the node leading the consumer is killed, and restarted once
	// the commands published meanwhile are applied: first while commands
	// are being published and consumed, then while idem serve is idle
	// (everything applied, its pull request waiting on the leader). In
	// the second round the leader is, when idem serve's log tells which
	// node it is connected to, another node: idem serve's connection
	// survives, and only the pull request's heartbeat can tell it that
	// its request died with the leader.
	seg := 0
	segments := func(n int) []e2ePublish {
		var out []e2ePublish
		for ; n > 0; n-- {
			out = append(out, p.segments[seg]...)
			seg++
		}
		return out
	}
	for round, idle := range []bool{false, true} {
		var published func()
		if idle {
			r.waitDrained(appliedBy(p.segments[:seg]) + len(viaHTTP))
		} else {
			published = r.publishAsync(segments(1))
			r.waitConsuming(r.processed() + e2eKillAfter)
		}
		victim := natsConsumerLeader(t, c, js, stream, "idem-"+q)
		if idemNode := natsReconnectedTo(c, r.s.stderr.String()); victim == idemNode {
			victim = natsMoveConsumerLeader(t, c, nc, js, stream, "idem-"+q, idemNode)
		}
		disconnects := strings.Count(r.s.stderr.String(), natsDisconnected)
		c.Kill(victim)
		killed := time.Now()
		step(fmt.Sprintf("round %d (idle %v): killed %s, the consumer's leader", round+1, idle, c.NodeName(victim)))
		if published != nil {
			published()
		}
		r.publishSegment(segments(1))
		if round == 0 {
			r.post(viaHTTP[0], false)
		}
		// Consumption goes on without the node.
		r.waitApplied(appliedBy(p.segments[:seg]) + len(viaHTTP))
		resumed := time.Since(killed)
		reconnected := strings.Count(r.s.stderr.String(), natsDisconnected) > disconnects
		step(fmt.Sprintf("round %d: applied without the node, %s after the kill (idem serve reconnected: %v)",
			round+1, resumed.Round(time.Millisecond), reconnected))
		// natsinbox pulls with a short expiry and heartbeat
		// (Config.PullExpiry, PullHeartbeat): when the consumer's
		// leader dies holding idem serve's pull request, the client
		// gives up on it within seconds. With jetstream's defaults
		// (30 s, 15 s) consumption stalled 15 to 30 s in about one
		// round in four.
		if resumed > e2eClusterResume {
			t.Errorf("round %d (idle %v): the commands published around the loss of the consumer's leader were applied %s after the kill (idem serve reconnected: %v), want within %s: consumption stalled until the client's heartbeat check gave up on its pull request",
				round+1, idle, resumed.Round(time.Millisecond), reconnected, e2eClusterResume)
		}
		c.Start(victim)
		c.WaitReady(60 * time.Second)
		step(fmt.Sprintf("round %d: restarted %s", round+1, c.NodeName(victim)))
	}
	r.publishSegment(segments(len(p.segments) - seg))

	want := len(viaHTTP)
	for _, cmd := range p.cmds {
		if cmd.accepted {
			want++
		}
	}
	r.waitDrained(want)
	step("drained")
	r.audit(p, viaHTTP)
	r.finish(p, viaHTTP, want)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// e2eClusterResume bounds how long idem serve takes to apply what was
// published around the loss of its consumer's leader: the election of a
// new leader (5 to 10 s here), a new pull request, and AckWait (3 s) for
// the messages whose acks the dead leader took with it. Most rounds take
// 5 to 6 s; with three test binaries sharing two cores, one round in about
// six took 20.1 s. The bound catches jetstream's default pull settings,
// whose stall reached 30 s, without failing on a loaded machine.
const e2eClusterResume = 30 * time.Second

// natsDisconnected is what idem serve logs when it loses its NATS server.
const natsDisconnected = "lost the NATS server"

// natsReconnectedTo returns the index of the node idem serve last
// reconnected to, as its log says, or -1.
func natsReconnectedTo(c *natstest.Cluster, log string) int {
	i := strings.LastIndex(log, "reconnected to NATS")
	if i < 0 {
		return -1
	}
	line, _, _ := strings.Cut(log[i:], "\n")
	for n := range c.Len() {
		if strings.Contains(line, "server="+c.NodeURL(n)) {
			return n
		}
	}
	return -1
}

// natsMoveConsumerLeader has the consumer's leader step down until another
// node than avoid leads it, and returns that node's index.
func natsMoveConsumerLeader(t *testing.T, c *natstest.Cluster, nc *nats.Conn, js jetstream.JetStream, stream, durable string, avoid int) int {
	t.Helper()
	for range 10 {
		if _, err := nc.Request("$JS.API.CONSUMER.LEADER.STEPDOWN."+stream+"."+durable, nil, 10*time.Second); err != nil {
			t.Logf("consumer leader step-down: %v", err)
		}
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if l := natsLeaderIndex(c, js, stream, durable); l >= 0 && l != avoid {
				return l
			} else if l >= 0 {
				break // led by avoid again: step down again
			}
		}
	}
	t.Fatalf("the consumer %s is still led by %s", durable, c.NodeName(avoid))
	return -1
}

// natsLeaderIndex returns the index of the node leading the consumer, or
// -1 while it has none (or on an error).
func natsLeaderIndex(c *natstest.Cluster, js jetstream.JetStream, stream, durable string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		return -1
	}
	info, err := cons.Info(ctx)
	if err != nil || info.Cluster == nil {
		return -1
	}
	for i := range c.Len() {
		if c.NodeName(i) == info.Cluster.Leader {
			return i
		}
	}
	return -1
}

// natsConsumerLeader returns the index of the node leading the consumer,
// waiting for one to lead it.
func natsConsumerLeader(t *testing.T, c *natstest.Cluster, js jetstream.JetStream, stream, durable string) int {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if l := natsLeaderIndex(c, js, stream, durable); l >= 0 {
			return l
		}
	}
	t.Fatalf("no node leads the consumer %s", durable)
	return -1
}

// appliedBy counts the accepted commands that segs publish.
func appliedBy(segs [][]e2ePublish) int {
	n := 0
	for _, seg := range segs {
		for _, p := range seg {
			if !p.dup && p.cmd.accepted {
				n++
			}
		}
	}
	return n
}
