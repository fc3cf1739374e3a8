package testclock_test

import (
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testclock"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	c := testclock.New()
	start := c.Now()
	if !c.Now().Equal(start) {
		t.Fatal("the clock moved by itself")
	}
	c.Advance(90 * time.Second)
	if got := c.Now().Sub(start); got != 90*time.Second {
		t.Fatalf("after Advance(90s) the clock moved %s", got)
	}
	c.Advance(-time.Minute)
	if got := c.Now().Sub(start); got != 30*time.Second {
		t.Fatalf("after Advance(-1m) the clock is %s from its start, want 30s", got)
	}
}
