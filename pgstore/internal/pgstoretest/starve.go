package pgstoretest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
)

// E3 under load: a refusal or a replay must not wait behind slow works.
// With every connection of the store's pool held by a work that waits
// (between statements, as a work waiting on a downstream call or a row
// lock does), a replay of a completed key and the refusal of a key in
// flight are answered while the works still hold the pool, on the
// connections reserved for probes; a new key waits for its turn and runs.
func testStarvedPool(t *testing.T, d Driver) {
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	const works = 2
	// The works wait for the test: no idle timeout may end them.
	e := open(t, d, Conn{SearchPath: schema, MaxConns: works}, Config{Schema: schema, ProbeConns: 2, IdleInTransactionTimeout: -1})
	mustExec(t, e, `CREATE TABLE effects (name text NOT NULL)`)
	g := newGuard(t, e.Store, nil)
	ctx := context.Background()
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "done", Fingerprint: "fp"}, effect(d, "done", idem.Result{Status: 201, Body: []byte("done")})); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	entered := make(chan struct{}, works)
	slow := make(chan error, works)
	for i := range works {
		go func() {
			_, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: fmt.Sprint("slow", i), Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
				if err := execIn(ctx, d, nil, `INSERT INTO effects (name) VALUES ('slow')`); err != nil {
					return idem.Result{}, err
				}
				entered <- struct{}{}
				<-release
				return idem.Result{Status: 201}, nil
			})
			slow <- err
		}()
	}
	for range works {
		<-entered
	}

	type answer struct {
		what     string
		replayed bool
		err      error
	}
	answers := make(chan answer, 2)
	go func() {
		_, replayed, err := g.Do(ctx, idem.Request{Scope: "s", Key: "done", Fingerprint: "fp"}, effect(d, "again", idem.Result{Status: 201}))
		answers <- answer{"replay", replayed, err}
	}()
	go func() {
		_, replayed, err := g.Do(ctx, idem.Request{Scope: "s", Key: "slow0", Fingerprint: "fp"}, effect(d, "again", idem.Result{Status: 201}))
		answers <- answer{"refusal", replayed, err}
	}()
	fresh := make(chan error, 1)
	go func() {
		_, replayed, err := g.Do(ctx, idem.Request{Scope: "s", Key: "new", Fingerprint: "fp"}, effect(d, "new", idem.Result{Status: 201}))
		if err == nil && replayed {
			err = errors.New("replayed")
		}
		fresh <- err
	}()
	// Both answers come while the slow works still hold the pool; the
	// timer only turns a hang into a failure.
	for range 2 {
		select {
		case a := <-answers:
			switch {
			case a.what == "replay" && (a.err != nil || !a.replayed):
				t.Errorf("replay of a completed key: replayed=%v err=%v", a.replayed, a.err)
			case a.what == "refusal" && !errors.Is(a.err, idem.ErrInFlight):
				t.Errorf("retry of a key in flight: replayed=%v err=%v, want ErrInFlight", a.replayed, a.err)
			}
		case <-time.After(time.Minute):
			close(release)
			t.Fatal("a replay or a refusal waited behind the slow works")
		}
	}
	close(release)
	for range works {
		if err := <-slow; err != nil {
			t.Errorf("slow work: %v", err)
		}
	}
	if err := <-fresh; err != nil {
		t.Errorf("a new key while the pool was held: %v, want its execution once a connection was free", err)
	}
	for name, want := range map[string]int{"slow": works, "new": 1, "again": 0} {
		if n := count(t, e, `SELECT count(*) FROM effects WHERE name = $1`, name); n != want {
			t.Errorf("effects %q = %d, want %d", name, n, want)
		}
	}
}
