package transfers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/idemkit/idem"
)

// Payout is the JSON form of a payout: the answer of POST /payouts (which
// leaves out State) and an entry of GET /payouts.
type Payout struct {
	ID      int64  `json:"id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	// State is pending, completed or declined (credited back).
	State string `json:"state,omitempty"`
	// ProviderChargeID is the provider's charge id, once known.
	ProviderChargeID string `json:"provider_charge_id,omitempty"`
	CreatedAt        string `json:"created_at"`
}

// Payout states.
const (
	PayoutPending   = "pending"
	PayoutCompleted = "completed"
	PayoutDeclined  = "declined"
)

// Step names of a payout's leased work (see docs/PAYOUTS.md).
const (
	stepDebit    = "debit"
	stepCharge   = "charge"
	stepComplete = "complete"
	stepRefund   = "refund"
)

// payoutRequest is the body of POST /payouts.
type payoutRequest struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// validatedPayoutKey carries the payoutRequest validatePayout decoded.
type validatedPayoutKey struct{}

// validatePayout refuses, before the idempotency layer, a POST /payouts
// that is too large (413), too slow (408), not one JSON payout or names an
// invalid account id (400), as validateTransfer does for transfers.
func (s *Service) validatePayout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		default:
			w.Header().Set("Retry-After", "1")
			problem(w, http.StatusServiceUnavailable, "too-busy", "Too busy",
				"too many requests are being received at once; nothing was done; retry later with the same Idempotency-Key")
			return
		}
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		in, no := decodePayout(body)
		if no != nil {
			problem(w, http.StatusBadRequest, no.kind, no.title, no.detail)
			return
		}
		ctx, cancel := s.work(r)
		defer cancel()
		r = r.WithContext(context.WithValue(ctx, validatedPayoutKey{}, in))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// decodePayout decodes and checks a POST /payouts body; a refusal is a 400.
func decodePayout(body []byte) (payoutRequest, *declined) {
	var in payoutRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return in, &declined{"malformed-json", "Malformed JSON", bounded(err.Error())}
	}
	if !validAccountID(in.Account) {
		return in, &declined{"invalid-account-id", "Invalid account id", "account must be an account id: " + invalidIDDetail}
	}
	return in, nil
}

// createPayout serves POST /payouts under its lease: the request's, or the
// completer's when it re-serves an abandoned one (then the body has not
// been through validatePayout). Its answer is final (recorded) unless it
// is a 5xx, which releases the claim with its recovery points kept.
func (s *Service) createPayout(w http.ResponseWriter, r *http.Request) {
	run, ok := idem.RunFrom(r.Context())
	if !ok {
		s.fail(w, r, errors.New("POST /payouts runs in leased mode: the request context carries no idem.Run"))
		return
	}
	in, validated := r.Context().Value(validatedPayoutKey{}).(payoutRequest)
	if !validated {
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		var no *declined
		if in, no = decodePayout(body); no != nil {
			problem(w, http.StatusBadRequest, no.kind, no.title, no.detail)
			return
		}
	}
	p, no, err := s.payout(r.Context(), run, in)
	switch {
	case errors.Is(err, errUnknownOutcome):
		s.cfg.Logger.WarnContext(r.Context(), "transfers: payout pending: the provider's answer is unknown", "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(providerRetryAfter))
		problem(w, http.StatusServiceUnavailable, "payout-pending", "Payout pending",
			"the provider's answer is unknown; the payout was kept where it stands and is never debited twice; retry with the same Idempotency-Key")
	case err != nil:
		s.fail(w, r, err) // 5xx: the claim is released, its steps kept
	case no != nil:
		problem(w, http.StatusUnprocessableEntity, no.kind, no.title, no.detail)
	default:
		writeJSON(w, http.StatusCreated, p)
	}
}

// providerRetryAfter is the Retry-After, in seconds, of a payout whose
// provider call had an unknown outcome.
const providerRetryAfter = 2

// payout runs a payout's steps, each at most once to completion whatever
// the executions (see docs/PAYOUTS.md): debit, charge, then complete or,
// on a decline, refund. It returns the payout, or a final refusal, or an
// error: one matching errUnknownOutcome when the provider's answer is
// unknown, which must not be compensated.
func (s *Service) payout(ctx context.Context, run *idem.Run, in payoutRequest) (Payout, *declined, error) {
	if in.Amount <= 0 {
		return Payout{}, &declined{"invalid-amount", "Invalid amount", "amount must be a positive integer number of cents"}, nil
	}
	opKey := debitOpKey(run)
	out, err := s.ledgerStep(ctx, run, stepDebit, func(ctx context.Context, q querier) ([]byte, error) {
		id, err := s.debit(ctx, q, in, opKey)
		if err != nil {
			return nil, err
		}
		return json.Marshal(id)
	})
	var no *declined
	if errors.As(err, &no) {
		return Payout{}, no, nil // rolled back: no debit, no payout
	}
	if err != nil {
		return Payout{}, nil, err
	}
	var id int64
	if err := json.Unmarshal(out, &id); err != nil {
		return Payout{}, nil, fmt.Errorf("the debit step's output %q: %w", out, err)
	}

	out, err = run.Step(ctx, stepCharge, func(ctx context.Context) ([]byte, error) {
		c, err := s.provider.charge(ctx, run.DerivedKey(stepCharge), in.Account, in.Amount)
		if err != nil {
			return nil, err
		}
		return json.Marshal(c)
	})
	if err != nil {
		return Payout{}, nil, err
	}
	var c chargeOutcome
	if err := json.Unmarshal(out, &c); err != nil {
		return Payout{}, nil, fmt.Errorf("the charge step's output %q: %w", out, err)
	}

	if c.Declined {
		_, err := s.ledgerStep(ctx, run, stepRefund, func(ctx context.Context, q querier) ([]byte, error) {
			return nil, s.refund(ctx, q, id)
		})
		if err != nil {
			return Payout{}, nil, err
		}
		return Payout{}, &declined{"payout-declined", "Payout declined",
			fmt.Sprintf("the provider declined the charge (status %d); the account was credited back", c.Status)}, nil
	}
	out, err = s.ledgerStep(ctx, run, stepComplete, func(ctx context.Context, q querier) ([]byte, error) {
		p, err := s.completePayout(ctx, q, id, c.ChargeID)
		if err != nil {
			return nil, err
		}
		return json.Marshal(p)
	})
	if err != nil {
		return Payout{}, nil, err
	}
	var p Payout
	if err := json.Unmarshal(out, &p); err != nil {
		return Payout{}, nil, fmt.Errorf("the complete step's output %q: %w", out, err)
	}
	return p, nil, nil
}

// debit takes amount from the account and inserts the pending payout with
// opKey, through q, and returns the payout's id. If a payout with opKey is
// already there, an earlier execution of this step committed it (and its
// recovery point was lost, which only a store without local steps can
// do): debit returns its id and writes nothing. An unknown account or
// insufficient funds is a *declined error (the caller rolls back).
func (s *Service) debit(ctx context.Context, q querier, in payoutRequest, opKey string) (int64, error) {
	var id int64
	switch err := q.queryRow(ctx, `SELECT id FROM payouts WHERE op_key = $1`, opKey).Scan(&id); {
	case err == nil:
		return id, nil
	case !errors.Is(err, errNoRows):
		return 0, err
	}
	n, err := q.exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2 AND balance >= $1`, in.Amount, in.Account)
	if err != nil {
		return 0, err
	}
	if n != 1 {
		var found int
		if err := q.queryRow(ctx, `SELECT count(*) FROM accounts WHERE id = $1`, in.Account).Scan(&found); err != nil {
			return 0, err
		}
		if found == 0 {
			return 0, &declined{"unknown-account", "Unknown account", fmt.Sprintf("account %q is not an account", in.Account)}
		}
		return 0, &declined{"insufficient-funds", "Insufficient funds", fmt.Sprintf("account %q cannot pay %d", in.Account, in.Amount)}
	}
	// Two executions racing here (a holder paused past its lease and its
	// successor) both miss the SELECT; the unique op_key fails the second
	// insert, and its transaction, debit included, rolls back.
	err = q.queryRow(ctx,
		`INSERT INTO payouts (account, amount, state, created_at, op_key) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		in.Account, in.Amount, PayoutPending, s.cfg.Now().UTC().UnixNano(), opKey).Scan(&id)
	return id, err
}

// refund credits a declined payout back and marks it declined, through q.
// A payout already declined was refunded by an earlier execution of this
// step: refund writes nothing and succeeds.
func (s *Service) refund(ctx context.Context, q querier, id int64) error {
	var account string
	var amount int64
	err := q.queryRow(ctx, `UPDATE payouts SET state = $1 WHERE id = $2 AND state = $3 RETURNING account, amount`,
		PayoutDeclined, id, PayoutPending).Scan(&account, &amount)
	if errors.Is(err, errNoRows) {
		var state string
		if err := q.queryRow(ctx, `SELECT state FROM payouts WHERE id = $1`, id).Scan(&state); err != nil {
			return fmt.Errorf("refund payout %d: %w", id, err)
		}
		if state == PayoutDeclined {
			return nil
		}
		return fmt.Errorf("refund payout %d: it is %s, not pending", id, state)
	}
	if err != nil {
		return fmt.Errorf("refund payout %d: %w", id, err)
	}
	_, err = q.exec(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, amount, account)
	return err
}

// completePayout records the provider's charge id on the payout and marks
// it completed, through q, and returns the payout as POST /payouts answers
// it. A payout already completed with chargeID was completed by an earlier
// execution of this step: completePayout returns it and writes nothing.
func (s *Service) completePayout(ctx context.Context, q querier, id int64, chargeID string) (Payout, error) {
	p := Payout{ID: id, ProviderChargeID: chargeID}
	// A charge that already pays another payout: the provider replayed an
	// old charge for this payout's key, as it does when a client reuses a
	// key after our record of it expired (the derived key is the same)
	// while the provider still remembers it. Completing would show one
	// charge for two debits; leave the payout pending, and so reported to
	// a human by the completer, rather than record it paid.
	var other int64
	switch err := q.queryRow(ctx, `SELECT id FROM payouts WHERE provider_charge_id = $1 AND id <> $2`, chargeID, id).Scan(&other); {
	case err == nil:
		return Payout{}, fmt.Errorf("complete payout %d: the provider's charge %q already pays payout %d (the key reused after its record expired?); left pending for a human", id, chargeID, other)
	case !errors.Is(err, errNoRows):
		return Payout{}, fmt.Errorf("complete payout %d: %w", id, err)
	}
	var created int64
	err := q.queryRow(ctx,
		`UPDATE payouts SET state = $1, provider_charge_id = $2 WHERE id = $3 AND state = $4 RETURNING account, amount, created_at`,
		PayoutCompleted, chargeID, id, PayoutPending).Scan(&p.Account, &p.Amount, &created)
	if errors.Is(err, errNoRows) {
		var state, charge string
		err = q.queryRow(ctx, `SELECT account, amount, created_at, state, coalesce(provider_charge_id, '') FROM payouts WHERE id = $1`, id).
			Scan(&p.Account, &p.Amount, &created, &state, &charge)
		if err == nil && (state != PayoutCompleted || charge != chargeID) {
			err = fmt.Errorf("it is %s with charge %q, not pending", state, charge)
		}
	}
	if err != nil {
		return Payout{}, fmt.Errorf("complete payout %d: %w", id, err)
	}
	p.CreatedAt = createdAt(created)
	return p, nil
}
