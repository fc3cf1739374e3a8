package transfers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Transfer is a transfer's JSON form.
type Transfer struct {
	ID        int64  `json:"id"`
	From      string `json:"from"`
	To        string `json:"to"`
	Amount    int64  `json:"amount"`
	CreatedAt string `json:"created_at"`
	// MessageID is the id of the message the transfer was made from,
	// exactly as published; absent for a transfer made over HTTP.
	MessageID string `json:"message_id,omitempty"`
	// BatchID and RowID name the import (idem import) and the row the
	// transfer was made from; absent for a transfer made otherwise.
	BatchID string `json:"batch_id,omitempty"`
	RowID   string `json:"row_id,omitempty"`
}

// origin is what a transfer records of where it came from: nothing over
// HTTP, a message id, or an import's batch and row.
type origin struct{ messageID, batchID, rowID string }

// declined is a final business answer: 422 over HTTP (recorded and
// replayed), a refusal for a message (settled).
type declined struct{ kind, title, detail string }

func (d *declined) Error() string { return d.kind + ": " + d.detail }

// transferRequest is the body of POST /transfers.
type transferRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// validateTransfer refuses, before the idempotency layer, a POST /transfers
// whose body is too large (413), too slow to arrive (408), not one JSON
// transfer, or names an account with an invalid id (400). Otherwise it
// hands the body on unchanged, in a context bounded by
// Config.RequestTimeout from now.
func (s *Service) validateTransfer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Admitted before the body is read: memory is bounded by the
		// slots, not by how many clients are sending.
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		default:
			w.Header().Set("Retry-After", "1")
			problem(w, http.StatusServiceUnavailable, "too-busy", "Too busy",
				"too many transfers are being received at once; nothing was done; retry later with the same Idempotency-Key")
			return
		}
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		var in transferRequest
		if err := json.Unmarshal(body, &in); err != nil {
			problem(w, http.StatusBadRequest, "malformed-json", "Malformed JSON", err.Error())
			return
		}
		if !validAccountID(in.From) || !validAccountID(in.To) {
			problem(w, http.StatusBadRequest, "invalid-account-id", "Invalid account id", "from and to must be account ids: "+invalidIDDetail)
			return
		}
		ctx, cancel := s.work(r)
		defer cancel()
		r = r.WithContext(context.WithValue(ctx, validatedKey{}, in))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// validatedKey carries the transferRequest validateTransfer decoded, so
// that the handler does not read and decode the body a second time.
type validatedKey struct{}

func (s *Service) createTransfer(w http.ResponseWriter, r *http.Request) {
	in, validated := r.Context().Value(validatedKey{}).(transferRequest)
	if !validated && !s.decode(w, r, &in) {
		return
	}
	ctx := r.Context()
	var (
		t     Transfer
		no    *declined
		err   error
		own   txn
		q, ok = s.db.current(ctx)
	)
	if s.cfg.Guard == nil {
		// Without idem: a transaction of our own, the same statements.
		if own, err = s.db.begin(ctx); err != nil {
			s.fail(w, r, err)
			return
		}
		defer own.rollback(context.WithoutCancel(ctx))
		q = own
	} else if !ok {
		s.fail(w, r, errors.New("no idempotency transaction in the request context"))
		return
	}
	t, no, err = s.transfer(ctx, q, in, origin{})
	if err == nil && no == nil && own != nil {
		err = own.commit(ctx)
	}
	switch {
	case err != nil:
		s.fail(w, r, err) // 5xx: the idempotency layer rolls back and records nothing
	case no != nil:
		problem(w, http.StatusUnprocessableEntity, no.kind, no.title, no.detail)
	default:
		w.Header().Set("Location", "/transfers/"+strconv.FormatInt(t.ID, 10))
		writeJSON(w, http.StatusCreated, t)
	}
}

// transfer applies one transfer through q: a debit that cannot overdraw, a
// credit and the transfer row, which records the fields of o that are not
// empty (NULL otherwise).
func (s *Service) transfer(ctx context.Context, q querier, in transferRequest, o origin) (Transfer, *declined, error) {
	from, to, amount := in.From, in.To, in.Amount
	switch {
	case amount <= 0:
		return Transfer{}, &declined{"invalid-amount", "Invalid amount", "amount must be a positive integer number of cents"}, nil
	case from == to:
		return Transfer{}, &declined{"same-account", "Same account", "from and to must be different accounts"}, nil
	}
	var (
		found     int
		toBalance int64
	)
	if err := q.queryRow(ctx, s.db.lock, from, to).Scan(&found, &toBalance); err != nil {
		return Transfer{}, nil, err
	}
	if found != 2 {
		return Transfer{}, &declined{"unknown-account", "Unknown account", fmt.Sprintf("from %q or to %q is not an account", from, to)}, nil
	}
	// Checked before any write: a 4xx commits, so a refusal must come
	// before the debit.
	if toBalance > math.MaxInt64-amount {
		return Transfer{}, &declined{"balance-overflow", "Balance overflow", fmt.Sprintf("account %q cannot hold %d more cents", to, amount)}, nil
	}
	n, err := q.exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2 AND balance >= $1`, amount, from)
	if err != nil {
		return Transfer{}, nil, err
	}
	if n != 1 {
		return Transfer{}, &declined{"insufficient-funds", "Insufficient funds", fmt.Sprintf("account %q cannot pay %d", from, amount)}, nil
	}
	if _, err := q.exec(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, amount, to); err != nil {
		return Transfer{}, nil, err
	}
	now := s.cfg.Now().UTC()
	t := Transfer{From: from, To: to, Amount: amount, CreatedAt: now.Format(time.RFC3339Nano), MessageID: o.messageID, BatchID: o.batchID, RowID: o.rowID}
	err = q.queryRow(ctx,
		`INSERT INTO transfers (src, dst, amount, created_at, message_id, batch_id, row_id) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		from, to, amount, now.UnixNano(), nullable(o.messageID), nullable(o.batchID), nullable(o.rowID)).Scan(&t.ID)
	if err == nil && s.cfg.Events {
		err = stageEvent(ctx, t)
	}
	return t, nil, err
}

func (s *Service) getTransfer(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		problem(w, http.StatusBadRequest, "invalid-transfer-id", "Invalid transfer id", "a transfer id is a positive integer")
		return
	}
	ctx, cancel := s.work(r)
	defer cancel()
	t := Transfer{ID: id}
	var created int64
	err = s.db.pool.queryRow(ctx, `SELECT src, dst, amount, created_at, coalesce(message_id, ''), coalesce(batch_id, ''), coalesce(row_id, '') FROM transfers WHERE id = $1`, id).
		Scan(&t.From, &t.To, &t.Amount, &created, &t.MessageID, &t.BatchID, &t.RowID)
	if errors.Is(err, errNoRows) {
		problem(w, http.StatusNotFound, "transfer-not-found", "Transfer not found", fmt.Sprintf("no transfer %d", id))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t.CreatedAt = createdAt(created)
	writeJSON(w, http.StatusOK, t)
}

// createdAt formats a stored created_at (Unix nanoseconds) as in the
// answer of POST /transfers.
func createdAt(nanos int64) string { return time.Unix(0, nanos).UTC().Format(time.RFC3339Nano) }

// nullable is s, or NULL when it is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
