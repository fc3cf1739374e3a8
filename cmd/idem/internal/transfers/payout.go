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
	"time"

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
	keys := payoutKeys{op: debitOpKey(run), legacyOp: legacyDebitOpKey(run), charge: run.DerivedKey(stepCharge)}
	out, err := s.ledgerStep(ctx, run, stepDebit, func(ctx context.Context, q querier) ([]byte, error) {
		id, err := s.debit(ctx, q, in, keys)
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

	// The ledger may hold the payout settled already: by an execution of
	// a record that was lost since (Redis), or by the orphan scan. Then
	// its outcome stands and the provider is not asked again.
	settled, err := s.touchPayout(ctx, id)
	if err != nil {
		return Payout{}, nil, err
	}
	out, err = run.Step(ctx, stepCharge, func(ctx context.Context) ([]byte, error) {
		if settled != nil {
			return json.Marshal(settled)
		}
		c, err := s.provider.charge(ctx, keys.charge, in.Account, in.Amount)
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
		return Payout{}, payoutDeclined(c.Status), nil
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

// debit takes amount from the account and inserts the pending payout
// under keys.op, through q, and returns the payout's id. An unknown
// account or insufficient funds is a *declined error (the caller rolls
// back).
//
// A payout already under keys.op (or keys.legacyOp) was made by an earlier
// execution of this payout's debit, whose recovery point, or whole leased
// record, was lost since (only a store without local steps, Redis, can
// lose them): debit returns its id and writes nothing. Unless it is older
// than Config.KeyTTL: then its record may have expired, and the key been
// reused for a new payout; its op_key is retired (see retiredOpKey) and
// the new payout is debited. A payout under the key, younger than that,
// of another account or amount is the key reused with another request,
// refused as the idempotency layer refuses it when it still has the
// record.
func (s *Service) debit(ctx context.Context, q querier, in payoutRequest, keys payoutKeys) (int64, error) {
	now := s.cfg.Now().UTC()
	var (
		id, amount, created int64
		account, opKey      string
	)
	switch err := q.queryRow(ctx, `SELECT id, account, amount, created_at, op_key FROM payouts WHERE op_key IN ($1, $2) ORDER BY id DESC LIMIT 1`,
		keys.op, keys.legacyOp).Scan(&id, &account, &amount, &created, &opKey); {
	case errors.Is(err, errNoRows):
	case err != nil:
		return 0, err
	case opKey == keys.legacyOp || now.Sub(time.Unix(0, created)) < s.cfg.KeyTTL:
		if account != in.Account || amount != in.Amount {
			return 0, &declined{"key-reused", "Idempotency-Key reused",
				fmt.Sprintf("the Idempotency-Key was used for payout %d, of another account or amount; nothing was done", id)}
		}
		return id, nil
	default:
		if _, err := q.exec(ctx, `UPDATE payouts SET op_key = $1 WHERE id = $2`, retiredOpKey(opKey, id), id); err != nil {
			return 0, err
		}
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
		`INSERT INTO payouts (account, amount, state, created_at, op_key, charge_key, seen_at) VALUES ($1, $2, $3, $4, $5, $6, $4) RETURNING id`,
		in.Account, in.Amount, PayoutPending, now.UnixNano(), keys.op, keys.charge).Scan(&id)
	return id, err
}

// payoutKeys are the keys of one payout: its op_key (and the one it had
// before debitOpKey was the intent's alone) and its charge's derived key.
type payoutKeys struct{ op, legacyOp, charge string }

// retiredOpKey is the op_key of payout id once its key names a new payout:
// unique, and never the op_key of an execution.
func retiredOpKey(opKey string, id int64) string {
	return opKey + ".retired." + strconv.FormatInt(id, 10)
}

// touchPayout records that an execution takes payout id up now (the
// orphan scan leaves such a payout alone: it has a live record), and
// returns its outcome if it is settled already: completed with its charge
// id, or declined. A pending payout returns nil.
func (s *Service) touchPayout(ctx context.Context, id int64) (*chargeOutcome, error) {
	var state, charge string
	err := s.db.pool.queryRow(ctx, `UPDATE payouts SET seen_at = $1 WHERE id = $2 RETURNING state, coalesce(provider_charge_id, '')`,
		s.cfg.Now().UTC().UnixNano(), id).Scan(&state, &charge)
	if err != nil {
		return nil, fmt.Errorf("take up payout %d: %w", id, err)
	}
	switch state {
	case PayoutCompleted:
		return &chargeOutcome{ChargeID: charge}, nil
	case PayoutDeclined:
		return &chargeOutcome{Declined: true}, nil
	}
	return nil, nil
}

// payoutDeclined is the final refusal of a payout the provider declined,
// with the provider's status when this execution saw it (0 when the
// ledger held the decline already).
func payoutDeclined(status int) *declined {
	detail := "the provider declined the charge; the account was credited back"
	if status != 0 {
		detail = fmt.Sprintf("the provider declined the charge (status %d); the account was credited back", status)
	}
	return &declined{"payout-declined", "Payout declined", detail}
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
