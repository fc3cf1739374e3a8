package memstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// A second BeginStep while a step of the key is open fails with an error
// that names the key by its digest, never by the key.
func TestBeginStepErrorNamesNoKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	const key = "key-sk_live_KEYSECRET-0001"
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Now: now, Lease: time.Minute})
	if err != nil || !c.Claimed {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	st, err := s.BeginStep(ctx, &idem.BeginStepParams{Lease: c.Lease, Name: "a", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Rollback(ctx)
	_, err = s.BeginStep(ctx, &idem.BeginStepParams{Lease: c.Lease, Name: "b", Now: now})
	if err == nil {
		t.Fatal("a second BeginStep while a step is open succeeded")
	}
	if strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), idem.KeyHash(key)) {
		t.Errorf("err = %q, want the key named by its digest %s only", err, idem.KeyHash(key))
	}
}
