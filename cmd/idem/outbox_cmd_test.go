package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/sqlitestore"
)

type refusingPublisher struct{}

func (refusingPublisher) Publish(context.Context, outbox.Envelope) error {
	return fmt.Errorf("%w: returned: NO_ROUTE\nno queue bound", outbox.ErrRefused)
}

// idem outbox lists the parked messages with their last error (never
// their bodies), and -unpark makes them pending again.
func TestOutboxCommandListsAndUnparks(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "idem.db")
	s, err := sqlitestore.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k1", "k2", "k3"} {
		if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: key}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 200}, outbox.Stage(ctx, outbox.Message{Name: "m", Subject: "transfers.created", Body: []byte(`{"secret":"body"}`)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Two of the three parked: refused 3 times with MaxAttempts 3.
	r := outbox.NewRelay(s.Outbox(), refusingPublisher{}, &outbox.RelayConfig{BatchSize: 2, MaxAttempts: 3})
	for range 3 {
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	parkedIDs := []string{outbox.ID("s", "k1", "m"), outbox.ID("s", "k2", "m")}

	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := (&Main{Stdout: &out, Stderr: &errOut}).Run(ctx, append([]string{"outbox", "-db", db}, args...))
		return out.String(), errOut.String(), err
	}
	show := func() outboxJSON {
		t.Helper()
		out, errOut, err := run("-json")
		var o outboxJSON
		if err != nil || json.Unmarshal([]byte(out), &o) != nil {
			t.Fatalf("idem outbox -json: %v\n%s\n%s", err, out, errOut)
		}
		return o
	}
	o := show()
	if o.Pending != 1 || o.Parked != 2 || len(o.Messages) != 2 || o.OldestPending == nil {
		t.Fatalf("idem outbox -json = %+v, want 1 pending and 2 parked", o)
	}
	for i, m := range o.Messages {
		if m.ID != parkedIDs[i] || m.Attempts != 3 || !strings.Contains(m.LastError, "NO_ROUTE") || m.Subject != "transfers.created" || m.BodyBytes != 17 {
			t.Errorf("parked message %d = %+v", i, m)
		}
	}
	text, _, err := run()
	if err != nil || !strings.Contains(text, "parked: 2") || !strings.Contains(text, parkedIDs[0]) || strings.Contains(text, "secret") {
		t.Errorf("idem outbox: %v\n%s", err, text)
	}
	if strings.Contains(text, "NO_ROUTE\n") {
		t.Errorf("a multi-line error broke the table:\n%s", text)
	}

	if out, _, err := run("-unpark", parkedIDs[0]+",msg_nope"); err == nil || !strings.Contains(err.Error(), "no parked message with id msg_nope") || !strings.Contains(out, "unparked 1") {
		t.Errorf("-unpark with an unknown id: %v, %q", err, out)
	}
	if o := show(); o.Pending != 2 || o.Parked != 1 {
		t.Errorf("after one unpark: %+v, want 2 pending, 1 parked", o)
	}
	if out, _, err := run("-unpark", "all"); err != nil || !strings.Contains(out, "unparked 1") {
		t.Errorf("-unpark all: %v, %q", err, out)
	}
	if o := show(); o.Pending != 3 || o.Parked != 0 || len(o.Messages) != 0 {
		t.Errorf("after -unpark all: %+v, want 3 pending", o)
	}
	// A mistyped SQLite path is not created.
	if _, _, err := run("-db", filepath.Join(t.TempDir(), "typo.db")); err == nil || !strings.Contains(err.Error(), "no database there") {
		t.Errorf("idem outbox on a missing file: %v", err)
	}
}
