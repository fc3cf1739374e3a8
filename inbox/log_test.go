package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/memstore"
)

// The inbox's log lines name a message by the digest of its key, never by
// its id (which may be a client's idempotency key), even where the
// handler's error quotes the id.
func TestInboxLogsNoMessageID(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	ib, err := inbox.New(memstore.New(), &inbox.Config{
		Name:   "payments",
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	const id = "intent-SECRETKEY-0001"
	fail := func(_ context.Context, m *inbox.Message) error { return fmt.Errorf("ledger down for %s", m.ID) }
	refuse := func(_ context.Context, m *inbox.Message) error { return inbox.Refuse(errors.New("bad " + m.ID)) }
	ok := func(context.Context, *inbox.Message) error { return nil }
	for _, step := range []struct {
		id string
		h  inbox.Handler
	}{{id, fail}, {id, ok}, {id, ok}, {"refused-SECRETKEY-0002", refuse}} {
		if _, err := ib.Process(context.Background(), &inbox.Message{ID: step.id, Body: []byte("1"), Attempt: 1}, step.h); err != nil && !strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("Process(%s): %v", step.id, err)
		}
	}
	out := log.String()
	if lines := strings.Count(out, "\n"); lines != 4 {
		t.Fatalf("%d log lines, want 4 (retry, applied, duplicate, refused):\n%s", lines, out)
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("the log holds a message id:\n%s", out)
	}
	if want := "key_sha256=" + idem.KeyHash(inbox.Key(id)); strings.Count(out, want) != 3 {
		t.Errorf("want 3 lines naming the message by %s:\n%s", want, out)
	}
	if want := "key_sha256:" + idem.KeyHash(inbox.Key(id)); !strings.Contains(out, want) {
		t.Errorf("the handler's error does not name the message by %s:\n%s", want, out)
	}
}
