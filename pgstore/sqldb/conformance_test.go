package sqldb_test

import (
	"testing"

	"github.com/idemkit/idem/pgstore/internal/pgstoretest"
)

func TestConformance(t *testing.T) { pgstoretest.Conformance(t, driver{}, pgstoretest.Config{}) }

func TestConformanceReplayProbe(t *testing.T) {
	pgstoretest.Conformance(t, driver{}, pgstoretest.Config{ReplayProbe: true})
}
