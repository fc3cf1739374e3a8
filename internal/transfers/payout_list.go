package transfers

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// PayoutList is the JSON form of GET /payouts.
type PayoutList struct {
	Payouts []Payout `json:"payouts"`
	Count   int      `json:"count"`
}

// listPayouts answers GET /payouts: every payout, oldest first, as a
// PayoutList, streamed as listTransfers streams transfers (a failure after
// the first byte cuts the connection).
func (s *Service) listPayouts(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.work(r)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		_ = http.NewResponseController(w).SetWriteDeadline(dl)
	}
	rs, err := s.db.pool.query(ctx,
		`SELECT id, account, amount, state, coalesce(provider_charge_id, ''), created_at FROM payouts ORDER BY id`)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rs.Close()
	more := rs.Next()
	if err := rs.Err(); !more && err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	buf := []byte(`{"payouts":[`)
	n := 0
	for ; more; more = rs.Next() {
		var p Payout
		var created int64
		if err := rs.Scan(&p.ID, &p.Account, &p.Amount, &p.State, &p.ProviderChargeID, &created); err != nil {
			s.abort(r, err)
		}
		p.CreatedAt = createdAt(created)
		if n > 0 {
			buf = append(buf, ',')
		}
		row, err := json.Marshal(p)
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
