package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/amqptest"
	"github.com/idemkit/idem/internal/pgtest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// An event published to a RabbitMQ exchange no queue is bound to comes
// back (mandatory publishing): idem serve -publish backs off between such
// refusals, parks the event after its attempts (never drops it), shows it
// in idem outbox, and publishes it once an operator bound a queue and ran
// idem outbox -unpark.
func TestUnroutableEventIsParkedThenUnparked(t *testing.T) {
	t.Parallel()
	url := amqptest.Require(t)
	_, db := pgtest.Schema(t)
	events := "parked_" + strings.ToLower(amqptest.Name(t, "e"))
	n := eventsNamed(events)
	queue := n.Queue
	t.Cleanup(func() {
		for _, name := range []string{queue, n.Exchange} {
			amqptest.Delete(t, url, name)
		}
	})
	srv := startIdem(t, "serve", "-db", db, "-publish", url, "-events", events)
	srv.accounts(t)
	start := time.Now()
	status, body := srv.do(t, "POST", "/transfers", "k-parked", `{"from":"a","to":"b","amount":5}`)
	if status != 201 {
		t.Fatalf("POST /transfers: %d %s", status, body)
	}
	outboxJSONOf := func() outboxJSON {
		t.Helper()
		out, err := exec.Command(binary, "outbox", "-db", db, "-json").Output()
		var o outboxJSON
		if err != nil || json.Unmarshal(out, &o) != nil {
			t.Fatalf("idem outbox -json: %v\n%s", err, out)
		}
		return o
	}
	var o outboxJSON
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if o = outboxJSONOf(); o.Parked == 1 || time.Now().After(deadline) {
			break
		}
	}
	if o.Parked != 1 || o.Pending != 0 || len(o.Messages) != 1 || !strings.Contains(o.Messages[0].LastError, "routed to no queue") {
		t.Fatalf("after 60 s: %+v, want the event parked as routed to no queue", o)
	}
	// Ten attempts, 5.5 s of backoff between them: never within 4 s.
	if took := time.Since(start); took < 4*time.Second {
		t.Errorf("parked %s after the transfer: the refusals were not backed off", took)
	}
	id := o.Messages[0].ID

	// The operator binds a queue and unparks the event.
	ch := amqptest.Channel(t)
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(queue, "", n.Exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary, "outbox", "-db", db, "-unpark", id).CombinedOutput(); err != nil || !strings.Contains(string(out), "unparked 1") {
		t.Fatalf("idem outbox -unpark %s: %v\n%s", id, err, out)
	}
	var got amqp.Delivery
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = d
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unparked event did not arrive in %s within 30 s; outbox %+v\n%s", queue, outboxJSONOf(), srv.stderr)
		}
	}
	var ev struct {
		EventID string `json:"event_id"`
		Amount  int64  `json:"amount"`
	}
	if err := json.Unmarshal(got.Body, &ev); err != nil || ev.EventID != id || got.MessageId != id || ev.Amount != 5 {
		t.Errorf("delivered %s (message-id %q), want the event %s", got.Body, got.MessageId, id)
	}
	if o := outboxJSONOf(); o.Pending != 0 || o.Parked != 0 {
		t.Errorf("after the unpark: %+v, want nothing pending or parked", o)
	}
	if code, _ := srv.stop(t); code != 0 {
		t.Errorf("idem serve exit %d\n%s", code, srv.stderr)
	}
}
