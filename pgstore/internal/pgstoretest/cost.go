package pgstoretest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// walLSN returns the server's current WAL position, in bytes.
func walLSN(b *testing.B, e *benchEnv) int64 {
	b.Helper()
	var n int64
	if err := e.DB.QueryRow(context.Background(), `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkCost measures what a first execution adds to the same
// transfer in a plain transaction, one call at a time so that the server
// does nothing else for this benchmark: the WAL each writes (the difference
// of pg_current_wal_lsn over a round, which only means the benchmark's own
// WAL on a server nobody else writes to), and the time of a call. The two
// run in alternating rounds of 100.
func BenchmarkCost(b *testing.B, d Driver) {
	const perRound = 100
	e := benchSetup(b, d, Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	var seq atomic.Int64
	type total struct {
		wal int64
		dur time.Duration
		n   int
	}
	var plain, withIdem total
	round := func(idemOn bool) {
		t := &plain
		if idemOn {
			t = &withIdem
		}
		before := walLSN(b, e)
		start := time.Now()
		for range perRound {
			key := fmt.Sprint(e.run, "-", seq.Add(1))
			var err error
			if idemOn {
				_, err = e.idemTransfer(context.Background(), key, rng)
			} else {
				err = e.plainTransfer(context.Background(), key, rng)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		t.dur += time.Since(start)
		t.wal += walLSN(b, e) - before
		t.n += perRound
	}
	round(false)
	round(true)
	plain, withIdem = total{}, total{}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		round(i%2 == 1)
		round(i%2 == 0)
	}
	b.ReportMetric(float64(plain.wal)/float64(plain.n), "plain-wal-B/op")
	b.ReportMetric(float64(withIdem.wal)/float64(withIdem.n), "idem-wal-B/op")
	b.ReportMetric(float64(plain.dur.Microseconds())/float64(plain.n), "plain-µs/op")
	b.ReportMetric(float64(withIdem.dur.Microseconds())/float64(withIdem.n), "idem-µs/op")
}

// BenchmarkRecords writes records as fast as 32 goroutines can, with a
// work that does nothing else: the write capacity of the server for
// records alone, in records/s (divide by the server's CPU time, measured
// outside, for records per core). It then reports what a record takes on
// disk: the table with its indexes and TOAST divided by the records in it,
// and the average pg_column_size of a row. The result is that of a small
// HTTP answer: 201, one recorded header, a 60-byte JSON body.
func BenchmarkRecords(b *testing.B, d Driver) {
	const conc = 32
	e := benchSetup(b, d, Config{})
	body := []byte(`{"id":"t-0123456789","status":"done","amount":12345,"cur":"EUR"}`)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				req := idem.Request{Scope: "user:1234567", Key: fmt.Sprintf("%s-%08d-4b1c-9d2e-5f6a7b8c9d0e", e.run, n), Fingerprint: "5b6f0a6c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c"}
				_, _, err := e.guard.Do(context.Background(), req, func(context.Context) (idem.Result, error) {
					return idem.Result{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: body}, nil
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	var total, rows int64
	var avgRow float64
	if err := e.DB.QueryRow(context.Background(), `SELECT pg_total_relation_size('idem_records'), count(*), coalesce(avg(pg_column_size(r.*)), 0) FROM idem_records AS r`).Scan(&total, &rows, &avgRow); err != nil {
		b.Fatal(err)
	}
	if rows > 0 {
		b.ReportMetric(float64(total)/float64(rows), "disk-B/record")
		b.ReportMetric(avgRow, "row-B")
	}
}
