package main

import (
	"bufio"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// -replay-cache reads bytes, or a number with a KiB, MiB or GiB suffix,
// into idem.Config.ReplayCacheBytes, where 0 turns the cache off (-1);
// anything else is refused.
func TestParseCacheSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want int64
		err  string
	}{
		{"32MiB", 32 << 20, ""},
		{"0", -1, ""},
		{"0MiB", -1, ""},
		{"1", 1, ""},
		{"65536", 65536, ""},
		{"512KiB", 512 << 10, ""},
		{"2GiB", 2 << 30, ""},
		{"8589934591GiB", 8589934591 << 30, ""},
		{"8589934592GiB", 0, "is too large"},
		{"9223372036854775808", 0, "is too large"},
		{"", 0, "must be a size"},
		{"MiB", 0, "must be a size"},
		{"-1", 0, "must be a size"},
		{"+1", 0, "must be a size"},
		{"1.5MiB", 0, "must be a size"},
		{"32MB", 0, "must be a size"},
		{"32mib", 0, "must be a size"},
		{"32 MiB", 0, "must be a size"},
		{"1MiBMiB", 0, "must be a size"},
	} {
		got, err := parseCacheSize(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parseCacheSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseCacheSize(%q) = %d, %v; want an error with %q", tt.in, got, err, tt.err)
		}
	}
	o, _ := parseCommandLine(t, []string{"serve"})
	if err := o.validate(); err != nil || o.(*serveOptions).cacheBytes != 32<<20 {
		t.Errorf("serve's default -replay-cache: %v, %d; want 32 MiB", err, o.(*serveOptions).cacheBytes)
	}
}

// idem serve answers a retry from its replay cache by default, and with
// -replay-cache 0 (or a cache too small for the record) from the
// database: the retry is a replay either way, and /metrics counts it as a
// cache hit only from the cache, and no lookup at all with it off.
func TestServeReplayCacheFlag(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name         string
		args         []string
		hits, misses int
	}{
		{"Default", nil, 1, 1},
		{"Sized", []string{"-replay-cache", "1MiB"}, 1, 1},
		// A record of POST /transfers is larger than 100 bytes: the
		// retry looks, misses, and is answered from the database.
		{"TooSmall", []string{"-replay-cache", "100"}, 0, 2},
		{"Off", []string{"-replay-cache", "0"}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"-db", filepath.Join(t.TempDir(), "cache.db")}, tt.args...)
			addr, stop, log := serveInProcess(t, func() {}, args...)
			for _, id := range []string{"a", "b"} {
				if status, body := httpDo(t, "PUT", "http://"+addr+"/accounts/"+id, "", `{"balance":1000}`); status != 200 {
					t.Fatalf("PUT /accounts/%s: %d %s", id, status, body)
				}
			}
			const body = `{"from":"a","to":"b","amount":5}`
			first, firstBody := httpDo(t, "POST", "http://"+addr+"/transfers", "k1", body)
			if first != 201 {
				t.Fatalf("POST /transfers: %d %s", first, firstBody)
			}
			req, _ := http.NewRequest("POST", "http://"+addr+"/transfers", strings.NewReader(body))
			req.Header.Set("Idempotency-Key", "k1")
			res, err := (&http.Client{Timeout: time.Minute}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 201 || res.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("retry: %d, Idempotent-Replayed %q; want 201, a replay", res.StatusCode, res.Header.Get("Idempotent-Replayed"))
			}
			hits, misses := cacheCounters(t, addr)
			if hits != tt.hits || misses != tt.misses {
				t.Errorf("replay cache hits %d, misses %d; want %d, %d", hits, misses, tt.hits, tt.misses)
			}
			if err := stop(); err != nil {
				t.Fatalf("idem serve: %v\n%s", err, log)
			}
		})
	}
}

// cacheCounters reads idem_replay_cache_hits_total and
// idem_replay_cache_misses_total of transport http from /metrics.
func cacheCounters(t *testing.T, addr string) (hits, misses int) {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	found := 0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var n *int
		switch name {
		case `idem_replay_cache_hits_total{transport="http"}`:
			n = &hits
		case `idem_replay_cache_misses_total{transport="http"}`:
			n = &misses
		default:
			continue
		}
		v, err := strconv.Atoi(value)
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		*n, found = v, found+1
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if found != 2 {
		t.Fatalf("/metrics has %d of the two replay cache counters of transport http", found)
	}
	return hits, misses
}

// idem serve gives the runtime a soft memory limit of the cache's bound
// plus its headroom, and GOMEMLIMIT, a size or off, overrides it.
func TestServeMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		env  string
		want float64
	}{
		{"Default", nil, "", 32<<20 + serveMemoryHeadroom},
		{"Sized", []string{"-replay-cache", "1GiB"}, "", 1<<30 + serveMemoryHeadroom},
		{"CacheOff", []string{"-replay-cache", "0"}, "", serveMemoryHeadroom},
		{"GOMEMLIMIT", nil, "GOMEMLIMIT=200MiB", 200 << 20},
		{"GOMEMLIMITOff", nil, "GOMEMLIMIT=off", math.MaxInt64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var env []string
			if tt.env != "" {
				env = []string{tt.env}
			}
			s := startServeEnv(t, "", env, append([]string{"-db", filepath.Join(t.TempDir(), "limit.db")}, tt.args...)...)
			_, metrics := s.do(t, "GET", "/metrics", "", "")
			var got float64
			for _, line := range strings.Split(metrics, "\n") {
				if v, ok := strings.CutPrefix(line, "go_gc_gomemlimit_bytes "); ok {
					got, _ = strconv.ParseFloat(v, 64)
				}
			}
			if got != tt.want {
				t.Errorf("go_gc_gomemlimit_bytes %v, want %v", got, tt.want)
			}
		})
	}
}
