package main

import (
	"os"
	"runtime/debug"
)

// serveMemoryHeadroom is what idem serve's soft memory limit allows the Go
// runtime beyond the replay cache's bound: the service's own heap (a few
// MB), request buffers and the collector's working room. It is measured in
// docs/BENCHMARKS.md#memory.
const serveMemoryHeadroom = 32 << 20

// setMemoryLimit gives the Go runtime a soft memory limit of the replay
// cache's bound plus serveMemoryHeadroom, unless GOMEMLIMIT is set (as a
// number or "off"), which always wins. Without a limit the collector lets
// the heap grow to twice what is live (GOGC=100), so a full cache would
// cost the process twice its bound. The limit is soft: a live heap above
// it (a burst of large bodies) is not refused, the collector only runs
// more often, and never takes more than about half the CPU. It returns
// the limit it set, or 0.
func setMemoryLimit(cacheBytes int64) int64 {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return 0
	}
	limit := max(cacheBytes, 0) + serveMemoryHeadroom // negative: the cache is off
	debug.SetMemoryLimit(limit)
	return limit
}
