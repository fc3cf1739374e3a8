package idemhttp

import (
	"log/slog"

	"github.com/idemkit/idem"
)

// callInfoAttrs adds to a log line what the Guard said of how it answered:
// replay_cache=hit or miss, and in_flight_local=true for a duplicate
// refused in process (docs/DESIGN.md#in-process).
func callInfoAttrs(attrs []slog.Attr, info idem.CallInfo) []slog.Attr {
	if info.ReplayCache != idem.CacheUnused {
		attrs = append(attrs, slog.String("replay_cache", string(info.ReplayCache)))
	}
	if info.LocalInFlight {
		attrs = append(attrs, slog.Bool("in_flight_local", true))
	}
	return attrs
}
