package check_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem/internal/check"
)

// replayOtherStatus is an endpoint that compares requests as JSON values
// (so reordered members are the same request) but replays a recorded 201
// as a 200 with the same body: rule 1's defect, not rule 4's.
type replayOtherStatus struct {
	mu      sync.Mutex
	effects int
	done    map[string]struct{ fp, body string }
}

func (s *replayOtherStatus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == http.MethodGet {
		fmt.Fprintf(w, `{"count":%d}`, s.effects)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	keys := r.Header.Values("Idempotency-Key")
	if key == "" || len(keys) != 1 || len(key) > 255 {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, c := range key {
		if c < 0x21 || c > 0x7e {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
	}
	b, _ := io.ReadAll(r.Body)
	var v any
	if json.Unmarshal(b, &v) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	fp, _ := json.Marshal(v) // map keys sorted: member order does not count
	scoped := r.Header.Get("Authorization") + "\n" + key
	if d, ok := s.done[scoped]; ok {
		if d.fp != string(fp) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusOK) // the defect: the original was 201
		io.WriteString(w, d.body)
		return
	}
	s.effects++
	body := fmt.Sprintf(`{"id":%d}`, s.effects)
	s.done[scoped] = struct{ fp, body string }{string(fp), body}
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, body)
}

// Rule 4 passes when the reordered body is answered as the identical
// retry is, also when both are 2xx (docs/CHECK.md): the server took it
// for the same request. That its replays change the status is rule 1's
// finding, and rule 2's, whose reason must not claim, against the
// counter, that it ran more than once.
func TestReorderedAnsweredAsIdenticalRetry(t *testing.T) {
	t.Parallel()
	s := &replayOtherStatus{done: map[string]struct{ fp, body string }{}}
	d := check.HandlerDoer(s)
	e := check.Endpoint{
		URL:        "/payments",
		Body:       []byte(`{"to":"bob","amount":10}`),
		Header:     http.Header{"Authorization": {"Bearer alice"}},
		Principal2: http.Header{"Authorization": {"Bearer bob"}},
		Effects:    check.URLCounter(d, "/payments/count", nil, "count"),
	}
	rep := run(t, d, e)
	assertStatuses(t, rep, map[int]check.Status{
		1: check.Fail, 2: check.Fail, 3: check.Pass, 4: check.Pass,
		5: check.Pass, 6: check.Pass, 7: check.Pass, 8: check.Pass,
	})
	for _, res := range rep.Results {
		if res.Rule == 2 && (strings.Contains(res.Reason, "more than once") || !strings.Contains(res.Reason, "one effect (counted)")) {
			t.Errorf("rule 2's reason %q: want one effect (counted), not a claim that it ran more than once", res.Reason)
		}
	}
}
