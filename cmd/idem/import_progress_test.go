package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/batch"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func progressAt(done, total int) batch.Progress {
	return batch.Progress{Counts: batch.Counts{Applied: done}, Done: done, Total: total}
}

// Off a terminal: plain lines, at most one every 2 seconds, and the last
// state always.
func TestProgressLines(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := newProgressBar(&out, false, clock.now)
	for i := 1; i <= 100; i++ {
		clock.t = clock.t.Add(100 * time.Millisecond) // 10 s in all
		p.update(progressAt(i, 100))
	}
	p.finish()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) < 5 || len(lines) > 7 {
		t.Errorf("%d lines over 10 s, want about one per 2 s and the last:\n%s", len(lines), out.String())
	}
	if last := lines[len(lines)-1]; last != "import: 100/100 rows (100%): applied 100, replayed 0, refused 0, failed 0, 10 rows/s" {
		t.Errorf("last line %q", last)
	}
	if strings.ContainsAny(out.String(), "\r\x1b") {
		t.Errorf("terminal controls in plain lines: %q", out.String())
	}
}

// On a terminal: one line redrawn in place (\r, then clear to its end),
// ended by finish.
func TestProgressBar(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := newProgressBar(&out, true, clock.now)
	clock.t = clock.t.Add(time.Second)
	p.update(progressAt(1, 4))
	p.update(progressAt(2, 4)) // within 100 ms of the last: not drawn
	clock.t = clock.t.Add(50 * time.Millisecond)
	p.update(progressAt(3, 4)) // nor this one
	p.finish()                 // draws 3/4, the last state, then ends the line
	s := out.String()
	if n := strings.Count(s, "\r"); n != 2 {
		t.Errorf("%d redraws, want 2 (1/4, and 3/4 at the end): %q", n, s)
	}
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("the bar's line is not ended once: %q", s)
	}
	if !strings.Contains(s, "[######################........]  75% 3/4") {
		t.Errorf("no 75%% bar in %q", s)
	}
	if strings.Contains(s, " 2/4") {
		t.Errorf("a redraw within 100 ms: %q", s)
	}
}
