package batch_test

import (
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
)

func TestKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 250)
	for _, tt := range []struct {
		batch, item, want string
	}{
		{"2026-05", "row-1", "7/2026-05/row-1"},
		{"a", "b/c", "1/a/b/c"},
		{"a/b", "c", "3/a/b/c"},
		{"b", "héllo", "sha256/"},         // not ASCII
		{"b", "has space", "sha256/"},     // not visible
		{long, "1", "sha256/"},            // too long
		{"sha256/x", "1", "8/sha256/x/1"}, // a plain key always starts with a digit
	} {
		got := batch.Key(tt.batch, tt.item)
		if err := idem.ValidateKey(got); err != nil {
			t.Errorf("Key(%q, %q) = %q: %v", tt.batch, tt.item, got, err)
		}
		if tt.want == "sha256/" {
			if !strings.HasPrefix(got, "sha256/") || len(got) != len("sha256/")+64 {
				t.Errorf("Key(%q, %q) = %q, want a sha256/ digest", tt.batch, tt.item, got)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tt.batch, tt.item, got, tt.want)
		}
	}
	// The length prefix keeps ids apart whatever they contain.
	if batch.Key("a/b", "c") == batch.Key("a", "b/c") {
		t.Error(`Key("a/b", "c") == Key("a", "b/c")`)
	}
	if batch.Key("b", "héllo") == batch.Key("b", "hello") || batch.Key("b", "é") == batch.Key("b", "è") {
		t.Error("two digests collide")
	}
}
