package memstore

import (
	"testing"

	"github.com/idemkit/idem/admintest"
)

func TestAdminConformance(t *testing.T) {
	admintest.Run(t, admintest.Harness{Open: func(testing.TB) admintest.Store { return New() }})
}
