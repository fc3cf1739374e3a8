package idemclient

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfterSeconds bounds delta-seconds before conversion so that the
// multiplication cannot overflow; Policy.Delay caps the result anyway.
const maxRetryAfterSeconds = 1 << 31

// parseRetryAfter reads a Retry-After field value (RFC 9110 10.2.3): either
// delta-seconds or an HTTP-date, which is turned into a delay from now. A
// date in the past means no wait. It returns NoRetryAfter for an absent or
// malformed value.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return NoRetryAfter
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && isDigits(v) {
				n = maxRetryAfterSeconds
			} else {
				return NoRetryAfter
			}
		}
		return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return NoRetryAfter
	}
	return max(t.Sub(now), 0)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
