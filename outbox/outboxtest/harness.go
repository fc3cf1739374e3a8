package outboxtest

import (
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
)

// Harness describes the store under test.
type Harness struct {
	// Open returns a fresh store with an empty outbox and a Source over
	// it, both closed at t's clean-up. Required. Each call may return a
	// new Source over the same outbox only through OpenSource.
	Open func(t testing.TB) (idem.Store, outbox.Source)
	// OpenSource, when set, returns another Source over the outbox of
	// the store Open returned (another relay's, with its own
	// connections): the store allows several relays at once, and the
	// suite checks they never publish a message twice at once and keep
	// the order of a partition key.
	OpenSource func(t testing.TB, s idem.Store) outbox.Source
}

// Validate reports what is missing from h.
func (h *Harness) Validate() error {
	if h.Open == nil {
		return errors.New("outboxtest: Harness.Open is nil")
	}
	return nil
}

// Run runs the suite against the store h describes.
func Run(t *testing.T, h *Harness) {
	t.Helper()
	suite.Run(t, h)
}
