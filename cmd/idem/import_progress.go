package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem/batch"
)

// progressBar shows a batch's progress: on a terminal, a bar redrawn in
// place at most every 100 ms; elsewhere (a file, a pipe, CI's log), a
// plain line at most every 2 seconds. Either way the last state is shown
// by finish. It is safe for concurrent use.
type progressBar struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu     sync.Mutex
	start  time.Time
	shown  time.Time // when the last line was drawn
	last   batch.Progress
	drawn  bool // last has been drawn
	active bool // a bar is on the terminal's current line
}

// Redraw intervals.
const (
	barEvery  = 100 * time.Millisecond
	lineEvery = 2 * time.Second
)

func newProgressBar(w io.Writer, tty bool, now func() time.Time) *progressBar {
	return &progressBar{w: w, tty: tty, now: now, start: now()}
}

// update is a batch.Config.Progress.
func (p *progressBar) update(pr batch.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.drawn = pr, false
	every := lineEvery
	if p.tty {
		every = barEvery
	}
	if now := p.now(); now.Sub(p.shown) >= every || pr.Done == pr.Total {
		p.draw(now)
	}
}

// finish shows the last state, if it has not been, and ends the bar's
// line.
func (p *progressBar) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.drawn && p.last.Total > 0 {
		p.draw(p.now())
	}
	if p.active {
		fmt.Fprintln(p.w)
		p.active = false
	}
}

const barWidth = 30

func (p *progressBar) draw(now time.Time) {
	pr := p.last
	p.shown, p.drawn = now, true
	pct := 100
	if pr.Total > 0 {
		pct = pr.Done * 100 / pr.Total
	}
	rate := ""
	if secs := now.Sub(p.start).Seconds(); secs > 0 && pr.Done > 0 {
		rate = fmt.Sprintf(", %.0f rows/s", float64(pr.Done)/secs)
	}
	counts := fmt.Sprintf("applied %d, replayed %d, refused %d, failed %d", pr.Applied, pr.Replayed, pr.Refused, pr.Failed)
	if !p.tty {
		fmt.Fprintf(p.w, "import: %d/%d rows (%d%%): %s%s\n", pr.Done, pr.Total, pct, counts, rate)
		return
	}
	full := barWidth * pct / 100
	bar := strings.Repeat("#", full) + strings.Repeat(".", barWidth-full)
	// \r returns to the line's start; \x1b[K clears what a longer line
	// left.
	fmt.Fprintf(p.w, "\r[%s] %3d%% %d/%d  %s%s\x1b[K", bar, pct, pr.Done, pr.Total, counts, rate)
	p.active = true
}
