package idemhttp

import (
	"testing"
	"time"
)

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   time.Duration
		want int64
	}{
		{-time.Second, 1},
		{0, 1},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{1500 * time.Millisecond, 2},
		{5 * time.Second, 5},
	} {
		if got := retryAfterSeconds(tc.in); got != tc.want {
			t.Errorf("retryAfterSeconds(%s): got %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestIsJSON(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json":                  true,
		"Application/JSON; charset=utf-8":   true,
		"application/problem+json":          true,
		"application/vnd.api+json":          true,
		"text/plain":                        false,
		"application/jsonl":                 false,
		"application/x-www-form-urlencoded": false,
		"":                                  false,
		"application/json; =bad":            false,
	} {
		if got := isJSON(ct); got != want {
			t.Errorf("isJSON(%q): got %v, want %v", ct, got, want)
		}
	}
}
