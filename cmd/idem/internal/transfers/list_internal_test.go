package transfers

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem/sqlitestore"
)

// listSetup returns a service on a SQLite ledger of n transfers whose
// reads count the rows they hand out.
func listSetup(t *testing.T, n int) (*Service, *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "bank.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	db := SQLite(store)
	scanned := new(atomic.Int64)
	db.pool = countingQ{db.pool, scanned}
	s, err := New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.DB().ExecContext(ctx, `INSERT INTO accounts VALUES ('a', 0), ('b<&>', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.DB().ExecContext(ctx, `
		WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $1)
		INSERT INTO transfers (src, dst, amount, created_at) SELECT 'a', 'b<&>', i, i * 1000 FROM c WHERE i <= $1`, n); err != nil {
		t.Fatal(err)
	}
	return s, scanned
}

type countingQ struct {
	querier
	n *atomic.Int64
}

func (q countingQ) query(ctx context.Context, s string, args ...any) (rows, error) {
	rs, err := q.querier.query(ctx, s, args...)
	if err != nil {
		return nil, err
	}
	return countingRows{rs, q.n}, nil
}

type countingRows struct {
	rows
	n *atomic.Int64
}

func (r countingRows) Next() bool {
	ok := r.rows.Next()
	if ok {
		r.n.Add(1)
	}
	return ok
}

// aheadWriter records, at every Write, how many rows the handler had read
// from the database beyond those already written out.
type aheadWriter struct {
	header   http.Header
	out      bytes.Buffer
	scanned  *atomic.Int64
	written  int64
	maxAhead int64
	writes   int
}

func (w *aheadWriter) Header() http.Header { return w.header }
func (w *aheadWriter) WriteHeader(int)     {}
func (w *aheadWriter) Write(p []byte) (int, error) {
	w.maxAhead = max(w.maxAhead, w.scanned.Load()-w.written)
	w.writes++
	w.written += int64(bytes.Count(p, []byte(`{"id":`)))
	return w.out.Write(p)
}

// GET /transfers writes each row as it reads it: at no point does the
// handler hold more than a few rows that it has not written, however large
// the ledger.
func TestListTransfersStreams(t *testing.T) {
	t.Parallel()
	const n = 20000
	s, scanned := listSetup(t, n)
	w := &aheadWriter{header: http.Header{}, scanned: scanned}
	s.ServeHTTP(w, httptest.NewRequest("GET", "/transfers", nil))
	var l TransferList
	if err := json.Unmarshal(w.out.Bytes(), &l); err != nil || l.Count != n || len(l.Transfers) != n {
		t.Fatalf("answer: count %d, %d transfers, %v; want %d", l.Count, len(l.Transfers), err, n)
	}
	if w.maxAhead > 100 {
		t.Errorf("the handler had read up to %d rows it had not written (%d writes); want it to stream", w.maxAhead, w.writes)
	}
}

// Streaming keeps the answer's bytes: the same JSON as encoding a
// TransferList with encoding/json, members in the same order, for an
// empty ledger, a small one and a limited listing.
func TestListTransfersJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rows  int
		query string
	}{{0, ""}, {3, ""}, {3, "?limit=2"}, {3, "?limit=0"}} {
		s, _ := listSetup(t, tt.rows)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/transfers"+tt.query, nil))
		var l TransferList
		if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
			t.Fatalf("%d rows %s: %v", tt.rows, tt.query, err)
		}
		var want bytes.Buffer
		_ = json.NewEncoder(&want).Encode(l)
		if got := w.Body.String(); w.Code != 200 || got != want.String() || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%d rows %s: %d %q\nwant 200 %q", tt.rows, tt.query, w.Code, got, want.String())
		}
		if tt.rows == 0 && w.Body.String() != "{\"transfers\":[],\"count\":0}\n" {
			t.Errorf("empty ledger: %q", w.Body.String())
		}
	}
}
