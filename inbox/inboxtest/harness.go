package inboxtest

import (
	"fmt"
	"testing"

	"github.com/idemkit/idem/storetest"
)

// Harness tells the suite how to drive one store: it is the store's
// storetest.Harness, of which the suite uses NewLocation, Open, Close,
// Persistent, Effect and CountEffects (the inbox runs on the same Store
// contract, so a store's conformance harness serves both suites).
type Harness = storetest.Harness

// Run runs the suite against the store h describes, each case as a
// subtest of t named after it. A failing case ends with the rule the inbox
// broke, in words. Call Run from a top-level test (see the package
// documentation).
func Run(t *testing.T, h Harness) {
	t.Helper()
	suite.Run(t, &h)
}

// validate is the Harness's Validate, naming this suite.
func validate(h *Harness) error {
	if err := h.Validate(); err != nil {
		return fmt.Errorf("inboxtest: %w", err)
	}
	return nil
}
