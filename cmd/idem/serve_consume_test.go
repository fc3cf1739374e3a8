package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/pgtest"
)

// fakeBroker stands in for a broker in the tests of idem serve -consume:
// the "fake" source hands the messages sent on in to the inbox and
// reports each outcome.
type fakeBroker struct {
	in      chan fakeDelivery
	opened  atomic.Bool
	ended   chan struct{} // closed when run has returned
	params  consumeParams
	openErr error
	runErr  error // run returns it at once, when set
}

type fakeDelivery struct {
	m   *inbox.Message
	out chan fakeResult
}

type fakeResult struct {
	outcome inbox.Outcome
	err     error
}

// fakeBrokers holds the brokers by host: fake://<host>.
var fakeBrokers sync.Map

func init() {
	consumeSources["fake"] = func(ctx context.Context, p consumeParams) (func(context.Context) error, error) {
		u, err := url.Parse(p.URL)
		if err != nil {
			return nil, err
		}
		v, ok := fakeBrokers.Load(u.Host)
		if !ok {
			return nil, fmt.Errorf("no fake broker %q", u.Host)
		}
		b := v.(*fakeBroker)
		if b.openErr != nil {
			return nil, b.openErr
		}
		// Creating a stream or queue takes a moment: a server that
		// listened before it would answer /healthz meanwhile.
		time.Sleep(300 * time.Millisecond)
		b.params = p
		b.opened.Store(true)
		return func(ctx context.Context) error {
			defer close(b.ended)
			if b.runErr != nil {
				return b.runErr
			}
			for {
				select {
				case <-ctx.Done():
					// Stopping takes a moment too (in-flight
					// messages, the connection's close): a server
					// that did not wait would close the store first.
					time.Sleep(300 * time.Millisecond)
					return nil
				case d := <-b.in:
					o, err := p.Inbox.Process(ctx, d.m, p.Handler)
					d.out <- fakeResult{o, err}
				}
			}
		}, nil
	}
}

func newFakeBroker(t *testing.T) (*fakeBroker, string) {
	b := &fakeBroker{in: make(chan fakeDelivery), ended: make(chan struct{})}
	host := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	fakeBrokers.Store(host, b)
	t.Cleanup(func() { fakeBrokers.Delete(host) })
	return b, "fake://" + host
}

// publish delivers a message and returns its outcome.
func (b *fakeBroker) publish(t *testing.T, id, body string, attempt int) (inbox.Outcome, error) {
	t.Helper()
	d := fakeDelivery{&inbox.Message{ID: id, Body: []byte(body), Attempt: attempt}, make(chan fakeResult, 1)}
	select {
	case b.in <- d:
	case <-time.After(30 * time.Second):
		t.Fatal("the consumer did not take the message within 30s")
	}
	r := <-d.out
	return r.outcome, r.err
}

// serveInProcess runs idem serve through Main.Run until the returned
// stop is called, and waits until /healthz answers; check is called at
// that moment.
func serveInProcess(t *testing.T, check func(), args ...string) (addr string, stop func() error, log *lockedBuffer) {
	t.Helper()
	addr = freePort(t)
	log = new(lockedBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Main{Stdout: io.Discard, Stderr: log}).Run(ctx, append([]string{"serve", "-addr", addr}, args...))
	}()
	t.Cleanup(cancel)
	for range 1500 {
		res, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				check()
				return addr, func() error {
					cancel()
					select {
					case err := <-done:
						return err
					case <-time.After(60 * time.Second):
						t.Fatalf("idem serve did not return within 60s of its context's end\n%s", log)
						return nil
					}
				}, log
			}
		}
		select {
		case err := <-done:
			t.Fatalf("idem serve returned at start: %v\n%s", err, log)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("idem serve did not become healthy\n%s", log)
	return "", nil, nil
}

func httpDo(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// idem serve -consume end to end, on SQLite and PostgreSQL, with a
// channel-fed source: the source is open before /healthz answers; each
// command applies once and its duplicates are acknowledged; refused
// commands are settled and counted in /metrics; HTTP keeps working; on
// shutdown the consumer has stopped before serve returns (and closes the
// store).
func TestServeConsumes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "consume.db") }},
		{"Postgres", func(t *testing.T) string { _, dsn := pgtest.Schema(t); return dsn }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			serveConsumes(t, tt.db(t))
		})
	}
}

func serveConsumes(t *testing.T, db string) {
	broker, source := newFakeBroker(t)
	addr, stop, log := serveInProcess(t, func() {
		if !broker.opened.Load() {
			t.Error("/healthz answered before the source was opened")
		}
	}, "-db", db, "-consume", source)
	base := "http://" + addr
	if p := broker.params; p.URL != source || p.Queue != "transfers" || p.Inbox == nil || p.Handler == nil || p.Logger == nil || p.Inbox.Name() != "transfers" {
		t.Errorf("consumeParams = %+v, want the URL, queue transfers, an inbox named transfers, a handler and a logger", p)
	}
	for _, id := range []string{"alice", "bob"} {
		if status, body := httpDo(t, "PUT", base+"/accounts/"+id, "", `{"balance":1000}`); status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, status, body)
		}
	}

	applied := map[string]string{
		"cmd-1": `{"from":"alice","to":"bob","amount":100}`,
		"cmd-2": `{"from":"bob","to":"alice","amount":30}`,
		"cmd-3": `{"from":"alice","to":"bob","amount":1}`,
	}
	for id, body := range applied {
		if o, err := broker.publish(t, id, body, 1); o != inbox.Applied {
			t.Errorf("%s: %s %v, want applied", id, o, err)
		}
	}
	for id, body := range applied { // published twice, or redelivered
		if o, err := broker.publish(t, id, body, 2); o != inbox.Duplicate {
			t.Errorf("%s again: %s %v, want duplicate", id, o, err)
		}
	}
	for id, body := range map[string]string{
		"bad-1": `{"from":"alice","to":"carol","amount":1}`,
		"bad-2": `{"from":"alice","to":"bob","amount":1000000}`,
		"bad-3": `not json`,
	} {
		if o, err := broker.publish(t, id, body, 1); o != inbox.Refused {
			t.Errorf("%s: %s %v, want refused", id, o, err)
		}
	}
	if o, _ := broker.publish(t, "bad-1", `{"from":"alice","to":"carol","amount":1}`, 2); o != inbox.Duplicate {
		t.Errorf("refused command again: %s, want duplicate", o)
	}
	if status, body := httpDo(t, "POST", base+"/transfers", "http-1", `{"from":"alice","to":"bob","amount":5}`); status != 201 {
		t.Errorf("POST /transfers: %d %s", status, body)
	}

	status, body := httpDo(t, "GET", base+"/transfers", "", "")
	var list struct {
		Transfers []map[string]any
		Count     int
	}
	if status != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("GET /transfers: %d %s", status, body)
	}
	seen := map[any]int{}
	for _, tr := range list.Transfers {
		seen[tr["message_id"]]++
	}
	if list.Count != 4 || seen["cmd-1"] != 1 || seen["cmd-2"] != 1 || seen["cmd-3"] != 1 || seen[nil] != 1 {
		t.Errorf("transfers by message_id = %v (count %d), want cmd-1, cmd-2, cmd-3 once and one HTTP transfer", seen, list.Count)
	}
	var a, b struct{ Balance int64 }
	_, ab := httpDo(t, "GET", base+"/accounts/alice", "", "")
	_, bb := httpDo(t, "GET", base+"/accounts/bob", "", "")
	if json.Unmarshal([]byte(ab), &a) != nil || json.Unmarshal([]byte(bb), &b) != nil || a.Balance != 924 || b.Balance != 1076 {
		t.Errorf("balances = %s %s, want alice 924, bob 1076", ab, bb)
	}

	_, metrics := httpDo(t, "GET", base+"/metrics", "", "")
	for _, want := range []string{
		`idem_inbox_messages_total{consumer="transfers",outcome="applied"} 3`,
		`idem_inbox_messages_total{consumer="transfers",outcome="duplicate"} 4`,
		`idem_inbox_messages_total{consumer="transfers",outcome="refused"} 3`,
		`idem_inbox_messages_total{consumer="transfers",outcome="retry"} 0`,
		`idem_inbox_messages_total{consumer="transfers",outcome="dead_letter"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := stop(); err != nil {
		t.Errorf("serve returned %v after its context ended\n%s", err, log)
	}
	select {
	case <-broker.ended:
	default:
		t.Error("serve returned, and so closed the store, while the consumer was still running")
	}
	if !strings.Contains(log.String(), "the consumer stopped") {
		t.Errorf("the consumer's end was not logged:\n%s", log)
	}
}

// A consumer that stops with an error takes the server down with an error,
// rather than leaving a service that no longer consumes.
func TestServeExitsWhenTheConsumerFails(t *testing.T) {
	t.Parallel()
	broker, source := newFakeBroker(t)
	broker.runErr = errors.New("broker gone for good")
	var errOut lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- (&Main{Stdout: io.Discard, Stderr: &errOut}).Run(context.Background(),
			[]string{"serve", "-addr", freePort(t), "-db", filepath.Join(t.TempDir(), "x.db"), "-consume", source, "-grace", "2s"})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "broker gone for good") {
			t.Errorf("serve returned %v, want the consumer's error", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after its consumer failed\n%s", errOut.String())
	}
}

// A source that cannot be opened fails the start, before anything listens.
func TestServeFailsWhenTheSourceCannotOpen(t *testing.T) {
	t.Parallel()
	broker, source := newFakeBroker(t)
	broker.openErr = errors.New("connection refused")
	addr := freePort(t)
	err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(),
		[]string{"serve", "-addr", addr, "-db", filepath.Join(t.TempDir(), "x.db"), "-consume", source + "?password=x"})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("serve = %v, want the source's error", err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("something answers on the address of a serve that failed to start")
	}
}

func TestConsumeUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-consume", "kafka://127.0.0.1:9092"}, "supported schemes: "},
		{[]string{"-consume", "127.0.0.1:4222"}, "supported schemes"},
		{[]string{"-consume", "nats:"}, "supported schemes"},
		{[]string{"-consume-queue", "q"}, "only with -consume"},
		{[]string{"-consume-ttl", "1h"}, "only with -consume"},
		{[]string{"-consume", "fake://x", "-consume-queue", "a.b"}, "-consume-queue"},
		{[]string{"-consume", "fake://x", "-consume-queue", ""}, "-consume-queue"},
		{[]string{"-consume", "fake://x", "-consume-queue", strings.Repeat("q", 65)}, "-consume-queue"},
		{[]string{"-consume", "fake://x", "-consume-ttl", "0s"}, "-consume-ttl"},
		{[]string{"-consume", "fake://x", "-idempotency", "off"}, "-idempotency on"},
		{[]string{"-consume", "kafka://u:hunter2@h:1"}, "kafka"},
	} {
		var errOut bytes.Buffer
		err := (&Main{Stdout: io.Discard, Stderr: &errOut}).Run(context.Background(), append([]string{"serve"}, tt.args...))
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("idem serve %v: %v, want a usage error mentioning %q", tt.args, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("idem serve %v: the error shows the password: %v", tt.args, err)
		}
		if strings.Contains(tt.want, "supported schemes") {
			for _, scheme := range consumeSchemes() {
				if !strings.Contains(fmt.Sprint(err), scheme) {
					t.Errorf("idem serve %v: %v does not name the supported scheme %q", tt.args, err, scheme)
				}
			}
		}
	}
}

func TestValidQueueName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"transfers": true, "Transfers_2": true, "eu-west-1": true, strings.Repeat("q", 64): true,
		"": false, "a.b": false, "a b": false, "a*": false, "a>": false, "ü": false, strings.Repeat("q", 65): false,
	} {
		if got := validQueueName(name); got != want {
			t.Errorf("validQueueName(%q) = %v, want %v", name, got, want)
		}
	}
}

// Every password of a broker URL list is hidden, not only the first.
func TestRedactURLList(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"amqp://guest:secret@127.0.0.1:5672/":   "amqp://guest:xxxxx@127.0.0.1:5672/",
		"nats://u:p1@a:4222,nats://u:p2@b:4222": "nats://u:xxxxx@a:4222,nats://u:xxxxx@b:4222",
		"nats://a:4222, nats://u:p@b:4222":      "nats://a:4222,nats://u:xxxxx@b:4222",
		// A NATS token is the user part without a password.
		"nats://s3cr3t-token@127.0.0.1:4222":             "nats://xxxxx@127.0.0.1:4222",
		"amqps://h:5671/?auth_token=s3cr3t&heartbeat=10": "amqps://h:5671/?auth_token=xxxxx&heartbeat=10",
		// Without credentials, as given (not "nats:").
		"nats://": "nats://",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
