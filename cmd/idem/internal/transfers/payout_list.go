package transfers

import "net/http"

// PayoutList is the JSON form of GET /payouts.
type PayoutList struct {
	Payouts []Payout `json:"payouts"`
	Count   int      `json:"count"`
}

// listPayouts answers GET /payouts: every payout, oldest first, as a
// PayoutList, streamed by streamList as GET /transfers is (a failure after
// the first byte cuts the connection).
func (s *Service) listPayouts(w http.ResponseWriter, r *http.Request) {
	q := `SELECT id, account, amount, state, coalesce(provider_charge_id, ''), created_at FROM payouts ORDER BY id`
	s.streamList(w, r, "payouts", q, nil, func(rs rows) (any, error) {
		var p Payout
		var created int64
		err := rs.Scan(&p.ID, &p.Account, &p.Amount, &p.State, &p.ProviderChargeID, &created)
		p.CreatedAt = createdAt(created)
		return p, err
	})
}
