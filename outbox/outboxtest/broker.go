package outboxtest

import (
	"context"
	"errors"
	"sync"

	"github.com/idemkit/idem/outbox"
)

// Broker is an outbox.Publisher that records, in order, every envelope it
// confirmed. Fail, when set, is asked first: a non-nil error is returned
// instead of confirming. A Broker is safe for concurrent use.
type Broker struct {
	mu        sync.Mutex
	confirmed []outbox.Envelope
	tries     map[string]int
	inFlight  map[string]bool
	overlap   []string // ids published by two publishes at once
	Fail      func(e outbox.Envelope) error
	// During, when set, runs while a publish is in flight, after Fail.
	During func(e outbox.Envelope)
}

var _ outbox.Publisher = (*Broker)(nil)

// Publish implements outbox.Publisher.
func (b *Broker) Publish(ctx context.Context, e outbox.Envelope) error {
	b.mu.Lock()
	if b.tries == nil {
		b.tries, b.inFlight = map[string]int{}, map[string]bool{}
	}
	b.tries[e.ID]++
	if b.inFlight[e.ID] {
		b.overlap = append(b.overlap, e.ID)
	}
	b.inFlight[e.ID] = true
	fail, during := b.Fail, b.During
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.inFlight, e.ID)
		b.mu.Unlock()
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	if fail != nil {
		if err := fail(e); err != nil {
			return err
		}
	}
	if during != nil {
		during(e)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.confirmed = append(b.confirmed, e)
	return nil
}

// Confirmed returns the envelopes confirmed so far, in order.
func (b *Broker) Confirmed() []outbox.Envelope {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]outbox.Envelope(nil), b.confirmed...)
}

// Tries returns how many publishes of id the broker saw.
func (b *Broker) Tries(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tries[id]
}

// Overlaps returns the ids that were published twice at once.
func (b *Broker) Overlaps() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.overlap...)
}

// errDown is what a Broker whose Fail refuses transiently returns.
var errDown = errors.New("outboxtest: the broker is down")
