package idemclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemclient"
)

// resolveFailingJournal is a memory journal whose MarkResolved fails with
// an error that names the key.
type resolveFailingJournal struct {
	mu      sync.Mutex
	intents []*idemclient.Intent
}

func (j *resolveFailingJournal) Save(_ context.Context, in *idemclient.Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.intents = append(j.intents, in)
	return nil
}

func (j *resolveFailingJournal) Pending(context.Context) ([]*idemclient.Intent, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]*idemclient.Intent(nil), j.intents...), nil
}

func (j *resolveFailingJournal) MarkResolved(_ context.Context, p *idemclient.MarkResolvedParams) error {
	return fmt.Errorf("journal: disk full writing intent %s", p.Key)
}

func (j *resolveFailingJournal) Prune(context.Context, *idemclient.PruneParams) (int, error) {
	return 0, errors.New("not used")
}

// The line the client logs when it cannot mark an intent resolved names the
// intent by the digest of its key, never by the key, even where the
// journal's error quotes it.
func TestClientLogsNoKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return log.Write(p)
	}), nil))
	e := setup(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":1}`)
	}, func(cfg *idemclient.Config) {
		cfg.Journal = &resolveFailingJournal{}
		cfg.Logger = logger
	})
	in := e.intent(t, `{"amount":1}`)
	res, err := e.client.Do(context.Background(), in)
	if err != nil || res.Status != http.StatusCreated {
		t.Fatalf("Do: %v, %v; want 201", res, err)
	}
	mu.Lock()
	out := log.String()
	mu.Unlock()
	if !strings.Contains(out, "could not mark intent resolved") {
		t.Fatalf("no line for the failed MarkResolved:\n%s", out)
	}
	if strings.Contains(out, in.Key) {
		t.Errorf("the log holds the key %q:\n%s", in.Key, out)
	}
	if want := "key_sha256=" + idem.KeyHash(in.Key); !strings.Contains(out, want) {
		t.Errorf("the log does not name the intent by %s:\n%s", want, out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
