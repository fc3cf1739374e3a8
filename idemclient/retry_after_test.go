package idemclient

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name, in string
		want     time.Duration
	}{
		{"Empty", "", NoRetryAfter},
		{"Seconds", "3", 3 * time.Second},
		{"Zero", "0", 0},
		{"Spaces", " 12 ", 12 * time.Second},
		{"Huge", "99999999999999999999999", maxRetryAfterSeconds * time.Second},
		{"Negative", "-1", NoRetryAfter},
		{"Fraction", "1.5", NoRetryAfter},
		{"Garbage", "soon", NoRetryAfter},
		{"HTTPDate", now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second},
		{"RFC850Date", now.Add(time.Minute).Format(time.RFC850), time.Minute},
		{"ANSICDate", now.Add(time.Hour).Format(time.ANSIC), time.Hour},
		{"PastDate", now.Add(-time.Hour).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := parseRetryAfter(tt.in, now); got != tt.want {
				t.Errorf("parseRetryAfter(%q): got %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}
