package transfers

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// TransferList is the JSON form of GET /transfers.
type TransferList struct {
	Transfers []Transfer `json:"transfers"`
	Count     int        `json:"count"`
}

// listTransfers answers GET /transfers[?limit=N]: every transfer (or the
// first N), oldest first, as a TransferList. Rows are encoded as they are
// read, so that a large ledger is never held in memory; the count comes
// after the array, once it is known.
//
// A failure before the first byte is answered 503. A failure after it
// (the database, or Config.RequestTimeout on a slow reader) cannot change
// the status any more: the connection is cut, so that the client sees a
// truncated answer rather than a well-formed short list.
func (s *Service) listTransfers(w http.ResponseWriter, r *http.Request) {
	q := `SELECT id, src, dst, amount, created_at, coalesce(message_id, ''), coalesce(batch_id, ''), coalesce(row_id, '') FROM transfers ORDER BY id`
	var args []any
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			problem(w, http.StatusBadRequest, "invalid-limit", "Invalid limit", "limit must be a non-negative integer")
			return
		}
		q += ` LIMIT $1`
		args = append(args, n)
	}
	s.streamList(w, r, "transfers", q, args, func(rs rows) (any, error) {
		var t Transfer
		var created int64
		err := rs.Scan(&t.ID, &t.From, &t.To, &t.Amount, &created, &t.MessageID, &t.BatchID, &t.RowID)
		t.CreatedAt = createdAt(created)
		return t, err
	})
}

// streamList answers a list as {"<member>":[…],"count":N}, each row of q
// read by scan and encoded as it is read, so that a long list is never held
// in memory; the count comes after the array, once it is known.
func (s *Service) streamList(w http.ResponseWriter, r *http.Request, member, q string, args []any, scan func(rows) (any, error)) {
	ctx, cancel := s.work(r)
	defer cancel()
	// A client that does not read holds the query's connection only until
	// the work's deadline: the write fails then.
	if dl, ok := ctx.Deadline(); ok {
		_ = http.NewResponseController(w).SetWriteDeadline(dl)
	}
	rs, err := s.db.pool.query(ctx, q, args...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rs.Close()
	// The first row is read before answering: some drivers report a
	// failed query only there.
	more := rs.Next()
	if err := rs.Err(); !more && err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	buf := append([]byte(`{"`+member), `":[`...)
	n := 0
	for ; more; more = rs.Next() {
		v, err := scan(rs)
		if err != nil {
			s.abort(r, err)
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		row, err := json.Marshal(v)
		if err != nil {
			s.abort(r, err)
		}
		if _, err := w.Write(append(buf, row...)); err != nil {
			return // the client is gone
		}
		buf = buf[:0]
		n++
	}
	if err := rs.Err(); err != nil {
		s.abort(r, err)
	}
	buf = append(buf, `],"count":`...)
	buf = strconv.AppendInt(buf, int64(n), 10)
	_, _ = w.Write(append(buf, "}\n"...))
}

// abort ends a response whose status has been sent: it logs why and cuts
// the connection (http.ErrAbortHandler), which the client sees as an
// incomplete answer.
func (s *Service) abort(r *http.Request, err error) {
	s.cfg.Logger.ErrorContext(r.Context(), "transfers: answer cut short", "method", r.Method, "path", r.URL.Path, "err", err)
	panic(http.ErrAbortHandler)
}
