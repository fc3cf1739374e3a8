package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/servertest"
)

// BenchmarkTransferCPU says where the cost of a first execution goes, in
// CPU time rather than throughput: per transfer answered 201, the CPU of
// this process (the clients and the services: HTTP, idem, pgx) and of the
// PostgreSQL server (every process named postgres, read from /proc, so the
// server must run on this host and serve nothing else meanwhile). It
// rotates rounds of one second of POST /transfers without idem, with it,
// and with it through a Guard whose in-process shortcuts (replay cache,
// local in-flight refusals) are off; at 8 and at 32 clients on a pool of
// 16 that the services share (idem bench's default), and at 32 clients
// once more without the connections pgstore reserves for probes
// (ProbeConns -1: at 32 clients the pool is always exhausted, and every
// first execution then probes before it waits). Run it with
//
//	go test -run '^$' -bench TransferCPU -benchtime 6x ./cmd/idem/internal/bench/
//
// where -benchtime Nx is the number of rounds of each variant. On a
// machine whose cores the clients, the services and the database share,
// the ratio of the total CPU per transfer bounds the throughput ratio of
// idem bench's overhead scenario (docs/BENCHMARKS.md).
func BenchmarkTransferCPU(b *testing.B) {
	pgtest.Require(b)
	server := "postgres"
	if serverCPU(server) == 0 {
		servertest.Missing(b, "BenchmarkTransferCPU", errors.New("no postgres process in /proc: the server's CPU can only be read on its own host"))
	}
	for _, v := range []struct {
		name       string
		clients    int
		probeConns int
	}{{"clients=8", 8, 0}, {"clients=32", 32, 0}, {"clients=32/probe-conns=none", 32, -1}} {
		b.Run(v.name, func(b *testing.B) { benchTransferCPU(b, pgtest.DSN(), server, v.clients, v.probeConns) })
	}
}

// BenchmarkTransferCPUMySQL is BenchmarkTransferCPU on MariaDB or MySQL
// (mysqlstore, IDEM_MYSQL_URL or mysql://root@127.0.0.1:3306/test), the
// server's CPU read from the process named mariadbd or mysqld:
//
//	go test -run '^$' -bench TransferCPUMySQL -benchtime 6x ./cmd/idem/internal/bench/
func BenchmarkTransferCPUMySQL(b *testing.B) {
	url := os.Getenv("IDEM_MYSQL_URL")
	if url == "" {
		url = "mysql://root@127.0.0.1:3306/test"
	}
	server := "mariadbd"
	if serverCPU(server) == 0 {
		server = "mysqld"
	}
	if serverCPU(server) == 0 {
		servertest.Missing(b, "BenchmarkTransferCPUMySQL", errors.New("no mariadbd or mysqld process in /proc: the server's CPU can only be read on its own host"))
	}
	for _, clients := range []int{8, 32} {
		b.Run(fmt.Sprint("clients=", clients), func(b *testing.B) { benchTransferCPU(b, url, server, clients, 0) })
	}
}

func benchTransferCPU(b *testing.B, db, server string, clients, probeConns int) {
	ctx := context.Background()
	cfg, err := (&Config{DB: db, Concurrency: []int{clients}}).withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	be, err := open(ctx, cfg.DB, false, 16, probeConns)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = be.close(context.WithoutCancel(ctx)) }()
	r, err := newRunner(ctx, cfg, be)
	if err != nil {
		b.Fatal(err)
	}
	defer r.stop()
	if err := r.setup(ctx); err != nil {
		b.Fatal(err)
	}
	ks := &keys{prefix: r.runID + "-cpu-"}
	type variant struct {
		name           string
		do             op
		t              *tally
		client, server time.Duration
	}
	plain := &variant{name: "plain", do: r.transferOp(r.plain.URL, ks, false), t: newTally("plain")}
	withIdem := &variant{name: "idem", do: r.transferOp(r.idem.URL, ks, false), t: newTally("idem")}
	storeOnly := &variant{name: "idem-shortcuts-off", do: r.transferOp(r.storeOnly.URL, ks, false), t: newTally("idem-shortcuts-off")}
	variants := []*variant{plain, withIdem, storeOnly}
	// One unmeasured round each fills the pools and the statement caches.
	for _, v := range variants {
		if err := round(ctx, newTally(v.name), clients, time.Second, false, v.do); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		k := i % len(variants)
		for _, v := range append(variants[k:len(variants):len(variants)], variants[:k]...) {
			c0, s0 := processCPU(), serverCPU(server)
			if err := round(ctx, v.t, clients, time.Second, true, v.do); err != nil {
				b.Fatal(err)
			}
			v.client += processCPU() - c0
			v.server += serverCPU(server) - s0
		}
	}
	b.StopTimer()
	if p := r.problemList(); len(p) > 0 {
		b.Fatal(p[0])
	}
	var total [3]float64
	for i, v := range variants {
		n := v.t.variant().Requests
		if n == 0 {
			b.Fatalf("%s: no transfer answered 201", v.name)
		}
		client := float64(v.client.Microseconds()) / float64(n)
		server := float64(v.server.Microseconds()) / float64(n)
		b.ReportMetric(client, v.name+"-client-µs/transfer")
		b.ReportMetric(server, v.name+"-server-µs/transfer")
		total[i] = client + server
	}
	b.ReportMetric(total[0]/total[1], "plain/idem-cpu")
	b.ReportMetric(total[0]/total[2], "plain/idem-shortcuts-off-cpu")
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU used by every process named name on this host,
// the children it has reaped included, from /proc/<pid>/stat; zero when
// there is none. A backend that ends between two readings takes its CPU
// with it, so the readings are only meaningful while the pool's
// connections stay open.
func serverCPU(name string) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, path := range stats {
		st, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(st, '('), bytes.LastIndexByte(st, ')')
		if open < 0 || end < open || !bytes.HasPrefix(st[open+1:end], []byte(name)) {
			continue
		}
		// After the command: state, ppid, … utime (14th field of the
		// line), stime, cutime, cstime (17th).
		f := bytes.Fields(st[end+1:])
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(string(v), 10, 64)
			ticks += n
		}
	}
	// USER_HZ is 100 on every Linux this runs on (sysconf(_SC_CLK_TCK)).
	return time.Duration(ticks) * 10 * time.Millisecond
}
