package mysqlstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/mysqltest"
)

// BenchmarkFirstExecution is one first execution of a one-statement work
// through a Guard, beside the same statement in a plain database/sql
// transaction, from -cpu goroutines at once:
//
//	go test -run '^$' -bench FirstExecution ./mysqlstore/
func BenchmarkFirstExecution(b *testing.B) {
	mysqltest.Require(b)
	_, dsn := mysqltest.Database(b)
	s := open(b, interpolate(b, dsn), nil)
	s.DB().SetMaxIdleConns(16)
	ctx := context.Background()
	b.Run("plain", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tx, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES (?)`, "plain"); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("idem", func(b *testing.B) {
		g, err := idem.New(s, &idem.Config{ReplayCacheBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := fmt.Sprint("k", benchKeys.Add(1))
				if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, work("idem", idem.Result{Status: 201, Body: []byte(`{"id":1,"amount":100}`)})); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// benchKeys numbers the keys of the benchmarks, so that each run of one
// (-count) executes new keys.
var benchKeys atomic.Int64
