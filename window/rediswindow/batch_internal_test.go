package rediswindow

import (
	"context"
	"testing"

	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/window"
	"github.com/redis/go-redis/v9"
)

// TestBatchLoadsAMissingScript runs a batch confirm with a script the
// server has never seen, as after a restart or a SCRIPT FLUSH (which this
// test must not do to a shared server): the pipeline's EVALSHAs are
// refused with NOSCRIPT, and the batch must load the script and confirm
// every id all the same.
func TestBatchLoadsAMissingScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Name(t, c)
	w, err := New(c, &Config{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	fresh := redis.NewScript(confirmSource + "-- " + name + "\n")
	if ok, err := fresh.Exists(ctx, c).Result(); err != nil || ok[0] {
		t.Fatalf("SCRIPT EXISTS of a new script = %v, %v; want false", ok, err)
	}
	rs, err := w.ReserveBatch(ctx, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	err = w.scriptBatch(ctx, "confirm", fresh, rs, w.cfg.Window.Milliseconds())
	if err != nil {
		t.Fatalf("batch confirm with an uncached script: %v", err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if r, err := w.Reserve(ctx, id); err != nil || r.Status != window.Done {
			t.Fatalf("Reserve(%q) after the batch confirm = %v, %v; want Done", id, r.Status, err)
		}
	}
	if ok, err := fresh.Exists(ctx, c).Result(); err != nil || !ok[0] {
		t.Fatalf("the batch did not load the script: %v, %v", ok, err)
	}
}
