package inbox_test

import (
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/memstore"
)

func TestKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 256)
	digest := func(s string) bool { return strings.HasPrefix(s, "sha256:") && len(s) == len("sha256:")+64 }
	for _, tt := range []struct {
		id       string
		same     bool // kept as it is
		digested bool
	}{
		{"order-42", true, false},
		{"0b9c2d3e-1f00-4a7b-9c1d-2e3f4a5b6c7d", true, false},
		{strings.Repeat("a", 255), true, false},
		{long, false, true},
		{"has space", false, true},
		{"ünïcode", false, true},
		{"sha256:" + strings.Repeat("0", 64), false, true}, // never mistaken for a digest
		{"\x00", false, true},
	} {
		got := inbox.Key(tt.id)
		if (got == tt.id) != tt.same || digest(got) != tt.digested {
			t.Errorf("Key(%q) = %q; want kept=%v digested=%v", tt.id, got, tt.same, tt.digested)
		}
		if err := idem.ValidateKey(got); err != nil {
			t.Errorf("Key(%q) = %q is not a valid key: %v", tt.id, got, err)
		}
	}
	if a, b := inbox.Key(long), inbox.Key(inbox.Key(long)); a == b {
		t.Errorf("an id and its digest share the key %q", a)
	}
	if inbox.Key("x y") == inbox.Key("x  y") {
		t.Error("two ids share a key")
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	for _, tt := range []struct {
		cfg  *inbox.Config
		want string
	}{
		{nil, "Config.Name"},
		{&inbox.Config{}, "Config.Name"},
		{&inbox.Config{Name: strings.Repeat("n", 129)}, "Config.Name"},
		{&inbox.Config{Name: "c", TTL: -1}, "Config.TTL"},
		{&inbox.Config{Name: "c", MaxAttempts: -1}, "Config.MaxAttempts"},
	} {
		if _, err := inbox.New(s, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v; want an error naming %s", tt.cfg, err, tt.want)
		}
	}
	if _, err := inbox.New(nil, &inbox.Config{Name: "c"}); err == nil {
		t.Error("New(nil store) succeeded")
	}
	ib, err := inbox.New(s, &inbox.Config{Name: "payments"})
	if err != nil {
		t.Fatal(err)
	}
	if ib.Name() != "payments" || ib.Scope() != "inbox/payments" || ib.MaxAttempts() != 5 {
		t.Errorf("Name, Scope, MaxAttempts = %q, %q, %d; want payments, inbox/payments, 5", ib.Name(), ib.Scope(), ib.MaxAttempts())
	}
}

func TestSettled(t *testing.T) {
	t.Parallel()
	for o, want := range map[inbox.Outcome]bool{
		inbox.Applied: true, inbox.Duplicate: true, inbox.Refused: true,
		inbox.Retry: false, inbox.DeadLetter: false,
	} {
		if o.Settled() != want {
			t.Errorf("%s.Settled() = %v, want %v", o, !want, want)
		}
	}
}
