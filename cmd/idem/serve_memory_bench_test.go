package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/demo"
)

// BenchmarkServeMemory measures what idem serve pays in memory for its
// replay cache: it runs idem serve as its own process on a fresh SQLite
// file, sends b.N POST /transfers with new keys from 32 clients, then
// b.N/4 retries of the most recent keys, and reports the server's memory
// at the end: rss-MB and rss-peak-MB (VmRSS and VmHWM of
// /proc/PID/status), heap-MB (the Go heap allocated, live and garbage),
// heap-goal-MB (the heap at which the next collection starts: about twice
// what was live after the last one), go-sys-MB (all the Go runtime has
// from the system) and other-MB (RSS that is not the Go runtime's: the
// program's text and SQLite's own heap, allocated outside Go's). Run with
// -benchtime Nx (see docs/BENCHMARKS.md#memory).
func BenchmarkServeMemory(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc/PID/status for the server's RSS")
	}
	for _, v := range []struct {
		name string
		args []string
		env  []string
	}{
		{"Cache32MiB", nil, nil},
		{"CacheOff", []string{"-replay-cache", "0"}, nil},
		{"IdempotencyOff", []string{"-idempotency", "off"}, nil},
		{"Cache32MiB_GOMEMLIMITOff", nil, []string{"GOMEMLIMIT=off"}},
	} {
		b.Run(v.name, func(b *testing.B) {
			addr := freePortTB(b)
			cmd := exec.Command(binary, append([]string{"serve", "-addr", addr, "-db", filepath.Join(b.TempDir(), "mem.db"), "-log-level", "warn"}, v.args...)...)
			cmd.Env = append(os.Environ(), v.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			base := "http://" + addr
			client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
			waitUp(b, client, base, &stderr)
			for _, id := range []string{"a", "b"} {
				if status := post(b, client, "PUT", base+"/accounts/"+id, "", `{"balance":1000000000000}`); status != 200 {
					b.Fatalf("PUT /accounts/%s: %d", id, status)
				}
			}
			const clients = 32
			var next atomic.Int64
			send := func(n int64, key func(i int64) string, want int) {
				next.Store(0)
				var wg sync.WaitGroup
				for range clients {
					wg.Go(func() {
						for i := next.Add(1); i <= n; i = next.Add(1) {
							if status := post(b, client, "POST", base+"/transfers", key(i), `{"from":"a","to":"b","amount":1}`); status != want {
								b.Errorf("POST /transfers: %d, want %d", status, want)
								return
							}
						}
					})
				}
				wg.Wait()
			}
			b.ResetTimer()
			send(int64(b.N), func(i int64) string { return "new-" + strconv.FormatInt(i, 10) }, 201)
			recent := max(int64(b.N)/4, 1)
			send(recent, func(i int64) string { return "new-" + strconv.FormatInt(int64(b.N)-recent+i, 10) }, 201)
			b.StopTimer()
			m := scrape(b, client, base)
			rss, hwm := procMemory(b, cmd.Process.Pid)
			const mb = 1 << 20
			b.ReportMetric(rss/mb, "rss-MB")
			b.ReportMetric(hwm/mb, "rss-peak-MB")
			b.ReportMetric(m["go_memstats_heap_alloc_bytes"]/mb, "heap-MB")
			b.ReportMetric(m["go_memstats_next_gc_bytes"]/mb, "heap-goal-MB")
			b.ReportMetric(m["go_memstats_sys_bytes"]/mb, "go-sys-MB")
			b.ReportMetric((rss-m["go_memstats_sys_bytes"])/mb, "other-MB")
		})
	}
}

func freePortTB(tb testing.TB) string {
	tb.Helper()
	addr, err := demo.FreeAddr()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

// waitUp waits, at most 10 s, for GET /healthz to answer 200.
func waitUp(tb testing.TB, c *http.Client, base string, stderr *bytes.Buffer) {
	tb.Helper()
	for range 500 {
		if res, err := c.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("idem serve did not become healthy\n%s", stderr)
}

func post(tb testing.TB, c *http.Client, method, url, key, body string) int {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := c.Do(req)
	if err != nil {
		tb.Error(err)
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// scrape reads the unlabelled samples of GET /metrics.
func scrape(tb testing.TB, c *http.Client, base string) map[string]float64 {
	tb.Helper()
	res, err := c.Get(base + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	m := make(map[string]float64)
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && !strings.HasPrefix(name, "#") && !strings.Contains(name, "{") {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				m[name] = v
			}
		}
	}
	return m
}

// procMemory returns VmRSS and VmHWM of pid, in bytes.
func procMemory(tb testing.TB, pid int) (rss, hwm float64) {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		switch {
		case err != nil:
		case name == "VmRSS":
			rss = kb * 1024
		case name == "VmHWM":
			hwm = kb * 1024
		}
	}
	return rss, hwm
}
