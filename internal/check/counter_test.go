package check_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem/internal/check"
)

func TestNumberAt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		doc, path string
		want      int64
		ok        bool
	}{
		{`{"count":3}`, "count", 3, true},
		{`{"data":{"total":12}}`, "data.total", 12, true},
		{`{"items":[{"n":1},{"n":5}]}`, "items.1.n", 5, true},
		{`{"items":[1,2,3]}`, "items.#", 3, true},
		{`[1,2]`, "#", 2, true},
		{`42`, "", 42, true},
		{`{"n":4.0}`, "n", 4, true},
		{`{"n":4.5}`, "n", 0, false},
		{`{"n":"4"}`, "n", 0, false},
		{`{"count":3}`, "total", 0, false},
		{`{"items":[1]}`, "items.3", 0, false},
		{`{"a":1}`, "a.b", 0, false},
		{`not json`, "", 0, false},
	} {
		got, err := check.NumberAt([]byte(tt.doc), tt.path)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("NumberAt(%s, %q) = %d, %v; want %d (ok=%v)", tt.doc, tt.path, got, err, tt.want, tt.ok)
		}
	}
}

func TestCommandCounter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if n, err := check.CommandCounter("echo '  17 '")(ctx); err != nil || n != 17 {
		t.Errorf("echo 17: %d, %v", n, err)
	}
	for _, cmd := range []string{"echo many", "exit 3", "echo 1.5"} {
		if n, err := check.CommandCounter(cmd)(ctx); err == nil {
			t.Errorf("%q: %d, want an error", cmd, n)
		}
	}
}

func TestURLCounter(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer x" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"count":9}`))
	})
	d := check.HandlerDoer(h)
	if n, err := check.URLCounter(d, "/c", http.Header{"Authorization": {"Bearer x"}}, "count")(context.Background()); err != nil || n != 9 {
		t.Errorf("got %d, %v; want 9", n, err)
	}
	if _, err := check.URLCounter(d, "/c", nil, "count")(context.Background()); err == nil {
		t.Error("a 401 counted")
	}
}

// A document that is not a number at the root says to give a path.
func TestNumberAtWithoutPathSaysWhatToGive(t *testing.T) {
	t.Parallel()
	_, err := check.NumberAt([]byte(`{"transfers":[],"count":0}`), "")
	if err == nil || !strings.Contains(err.Error(), "an object") || !strings.Contains(err.Error(), "--effects-path") {
		t.Fatalf("err = %v, want it to name the object and --effects-path", err)
	}
}
