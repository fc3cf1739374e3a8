package redistest

import "testing"

func TestAddr(t *testing.T) {
	t.Setenv("IDEM_REDIS_ADDR", "")
	if got := Addr(); got != DefaultAddr {
		t.Errorf("Addr() = %q, want %q", got, DefaultAddr)
	}
	t.Setenv("IDEM_REDIS_ADDR", "redis.example:6380")
	if got := Addr(); got != "redis.example:6380" {
		t.Errorf("Addr() = %q, want the variable's value", got)
	}
}
