package amqpinbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/memstore"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Prefetch: -1}, "Config.Prefetch"},
		{Config{Prefetch: 70000}, "Config.Prefetch"},
		{Config{Concurrency: -1}, "Config.Concurrency"},
		{Config{Concurrency: 5, Prefetch: 4}, "Config.Concurrency"},
		{Config{RetryDelay: -1}, "Config.RetryDelay"},
		{Config{MaxRetryDelay: -1}, "Config.MaxRetryDelay"},
		{Config{RetryDelay: time.Minute, MaxRetryDelay: time.Second}, "Config.MaxRetryDelay"},
		{Config{AMQP: amqp.Config{Heartbeat: -time.Second}}, "Config.AMQP.Heartbeat"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: got %v, want an error naming %s", tc.cfg, err, tc.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	got, err := (*Config)(nil).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefetch != DefaultPrefetch || got.Concurrency != 1 || got.RetryDelay != DefaultRetryDelay ||
		got.MaxRetryDelay != DefaultMaxRetryDelay || got.AMQP.Heartbeat != DefaultHeartbeat {
		t.Errorf("defaults %+v", got)
	}
	if got, _ := (&Config{Concurrency: 40}).withDefaults(); got.Prefetch != 80 {
		t.Errorf("Prefetch with Concurrency 40 = %d, want 80", got.Prefetch)
	}
}

func TestNewRejectsMissingParts(t *testing.T) {
	t.Parallel()
	ib, err := inbox.New(memstore.New(), &inbox.Config{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *inbox.Message) error { return nil }
	if _, err := New(nil, h, nil); err == nil {
		t.Error("New accepted a nil inbox")
	}
	if _, err := New(ib, nil, nil); err == nil {
		t.Error("New accepted a nil handler")
	}
}

func TestDeliveryCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    any
		want int
		ok   bool
	}{
		{int64(3), 3, true},
		{int32(2), 2, true},
		{int(1), 1, true},
		{uint8(4), 4, true},
		{int64(-1), 0, true},
		{"3", 0, false},
		{nil, 0, false},
	} {
		h := amqp.Table{}
		if tc.v != nil {
			h["x-delivery-count"] = tc.v
		}
		got, ok := deliveryCount(h)
		if got != tc.want || ok != tc.ok {
			t.Errorf("deliveryCount(%T %v) = %d, %v; want %d, %v", tc.v, tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// The consumer's own count: 1 on a first delivery, one more per failed
// delivery on redeliveries, the broker's count when larger; forgotten when
// the message settles; bounded.
func TestAttempts(t *testing.T) {
	t.Parallel()
	a := newAttempts(3)
	first := amqp.Delivery{}
	again := amqp.Delivery{Redelivered: true}
	for i, want := range []int{1, 2, 3, 4} {
		d := first
		if i > 0 {
			d = again
		}
		n := a.begin("m", d)
		if n != want {
			t.Fatalf("delivery %d: attempt %d, want %d", i+1, n, want)
		}
		a.end("m", n, inbox.Retry)
	}
	a.end("m", 5, inbox.Applied)
	if n := a.begin("m", again); n != 2 {
		t.Errorf("after settling: attempt %d, want 2 (a redelivery not counted here)", n)
	}
	if n := a.begin("q", amqp.Delivery{Redelivered: true, Headers: amqp.Table{"x-delivery-count": int64(6)}}); n != 7 {
		t.Errorf("with x-delivery-count 6: attempt %d, want 7", n)
	}
	for i := range 10 {
		a.end(fmt.Sprint(i), 1, inbox.Retry)
	}
	if len(a.ids) != 3 || a.order.Len() != 3 {
		t.Errorf("tracking %d ids (%d in order), want at most 3", len(a.ids), a.order.Len())
	}
}

func TestRetryDelayGrowsAndIsBounded(t *testing.T) {
	t.Parallel()
	c := &Consumer{cfg: Config{RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second}}
	for _, tc := range []struct {
		attempt int
		max     time.Duration
	}{{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond}, {5, time.Second}, {1000, time.Second}} {
		for range 50 {
			d := c.retryDelay(tc.attempt)
			if d > tc.max || d < tc.max*3/4 {
				t.Fatalf("attempt %d: delay %s, want within [%s, %s]", tc.attempt, d, tc.max*3/4, tc.max)
			}
		}
	}
}

func TestHeader(t *testing.T) {
	t.Parallel()
	got := header(amqp.Table{"s": "v", "b": []byte("w"), "n": int32(7), "l": []any{"x", int64(1)}})
	want := map[string][]string{"s": {"v"}, "b": {"w"}, "n": {"7"}, "l": {"x", "1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("header = %v, want %v", got, want)
	}
	if header(nil) != nil {
		t.Error("header(nil) is not nil")
	}
}

// Run's error for a bad URL does not show the password in it.
func TestRunBadURLHidesThePassword(t *testing.T) {
	t.Parallel()
	ib, err := inbox.New(memstore.New(), &inbox.Config{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(ib, func(context.Context, *inbox.Message) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"amqp://guest:s3cret@127.0.0.1:notaport/", "http://guest:s3cret@127.0.0.1/"} {
		err := c.Run(context.Background(), url, "q")
		if err == nil {
			t.Fatalf("Run(%q) = nil, want an error", url)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
