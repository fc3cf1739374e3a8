package demo

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// intentHeader carries an attempt's intent index from the clients to the
// faulty network, which records what happened to each attempt. The server
// ignores it.
const intentHeader = "X-Demo-Intent"

// maxTracedAttempts bounds the attempts kept per intent, so that a run's
// timeline stays bounded in memory (intents × maxTracedAttempts); the
// attempts past it are only counted.
const maxTracedAttempts = 24

// Timeline is what the faulty network saw of one mode's run, for the HTML
// report: every attempt of every intent, the faults that hit them, what
// the server answered, and when the server was killed.
type Timeline struct {
	// Duration is the length of the run, from the first intent to the
	// audit.
	Duration time.Duration
	// Kills are the times, from the start, at which the server was killed.
	Kills []time.Duration
	// Intents holds one trace per intent, in the plan's order.
	Intents []IntentTrace

	start time.Time
	mu    sync.Mutex
}

// IntentTrace is the story of one intent.
type IntentTrace struct {
	// Attempts are the first maxTracedAttempts attempts that reached the
	// network, in the order they started.
	Attempts []Attempt
	// Untraced counts the attempts past maxTracedAttempts.
	Untraced int
	// Applied is how many transfers the audit found for the intent: 1 is
	// right, 0 is lost, 2 or more is a duplicate.
	Applied int
}

// Attempt is one attempt as the network saw it.
type Attempt struct {
	// Start and End are offsets from the start of the run.
	Start, End time.Duration
	// Fault is what the network did to it.
	Fault Fault
	// Status is the server's answer (0 if the request never reached it),
	// and Replayed whether it was a replay (Idempotent-Replayed: true).
	// Under FaultDrop and FaultDelay the client never saw it.
	Status   int
	Replayed bool
}

func newTimeline(intents int) *Timeline {
	return &Timeline{start: time.Now(), Intents: make([]IntentTrace, intents)}
}

// kill records that the server was killed now.
func (t *Timeline) kill() {
	t.mu.Lock()
	t.Kills = append(t.Kills, time.Since(t.start))
	t.mu.Unlock()
}

// attemptTrace is an attempt being recorded.
type attemptTrace struct {
	t      *Timeline
	intent int
	a      Attempt
}

// begin starts recording the attempt r, or returns nil if r carries no
// intent (a read, the set-up, the audit).
func (t *Timeline) begin(r *http.Request) *attemptTrace {
	if t == nil {
		return nil
	}
	i, err := strconv.Atoi(r.Header.Get(intentHeader))
	if err != nil || i < 0 || i >= len(t.Intents) {
		return nil
	}
	return &attemptTrace{t: t, intent: i, a: Attempt{Start: time.Since(t.start)}}
}

// end records the attempt with what is known of it.
func (at *attemptTrace) end(fault Fault, status int, replayed bool) {
	if at == nil {
		return
	}
	t := at.t
	at.a.End, at.a.Fault, at.a.Status, at.a.Replayed = time.Since(t.start), fault, status, replayed
	t.mu.Lock()
	defer t.mu.Unlock()
	in := &t.Intents[at.intent]
	if len(in.Attempts) >= maxTracedAttempts {
		in.Untraced++
		return
	}
	in.Attempts = append(in.Attempts, at.a)
}

// finish closes the timeline with the audit's count per intent.
func (t *Timeline) finish(applied []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Duration = time.Since(t.start)
	for i := range t.Intents {
		if i < len(applied) {
			t.Intents[i].Applied = applied[i]
		}
	}
}
