package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// transfer is the benchmark's effect: two balance updates and an insert,
// the shape of the seed's POST /transfers.
func transfer(ctx context.Context, tx *sql.Tx, n int) error {
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = 1`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = 2`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO transfers (src, dst, amount, note) VALUES (1, 2, 1, ?)`, fmt.Sprint(n))
	return err
}

func benchStore(b *testing.B, sync string) (*sqlitestore.Store, *idem.Guard) {
	b.Helper()
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), &sqlitestore.Config{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for _, q := range []string{
		`CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)`,
		`CREATE TABLE transfers (id INTEGER PRIMARY KEY, src INTEGER, dst INTEGER, amount INTEGER, note TEXT)`,
		`INSERT INTO accounts (id, balance) VALUES (1, 1000000000), (2, 0)`,
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	g, err := idem.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	return s, g
}

// BenchmarkTransfer runs the same transfer with and without idem, alternating
// in one run, and reports both costs and their throughput ratio
// (idem/plain; 1.0 means no overhead). It also measures replays.
func BenchmarkTransfer(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s, g := benchStore(b, sync)
			ctx := context.Background()
			body := []byte(`{"id":1,"from":1,"to":2,"amount":1}`)
			var plain, guarded, replay time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				tx, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := transfer(ctx, tx, i); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				key := fmt.Sprintf("key-%d", i)
				r := idem.Request{Scope: "bench", Key: key, Fingerprint: "fp"}
				work := func(ctx context.Context) (idem.Result, error) {
					tx, _ := sqlitestore.TxFrom(ctx)
					return idem.Result{Status: 201, Body: body}, transfer(ctx, tx, i)
				}
				if _, _, err := g.Do(ctx, r, work); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if _, replayed, err := g.Do(ctx, r, work); err != nil || !replayed {
					b.Fatalf("replay: %v %v", replayed, err)
				}
				t3 := time.Now()
				plain += t1.Sub(t0)
				guarded += t2.Sub(t1)
				replay += t3.Sub(t2)
			}
			n := float64(b.N)
			b.ReportMetric(float64(plain.Nanoseconds())/n, "plain-ns/transfer")
			b.ReportMetric(float64(guarded.Nanoseconds())/n, "idem-ns/transfer")
			b.ReportMetric(float64(replay.Nanoseconds())/n, "replay-ns/op")
			b.ReportMetric(plain.Seconds()/guarded.Seconds(), "idem/plain-throughput")
			b.ReportMetric(guarded.Seconds()/replay.Seconds(), "replay/first-throughput")
		})
	}
}
