package transfers

import (
	"context"
	"errors"
)

// Declined is a final business refusal of a transfer: what POST /transfers
// answers 422 (an unknown account, a non-positive amount, a transfer to the
// same account, insufficient funds, a balance overflow, an invalid account
// id). Nothing was written; the refusal is an answer, to be recorded and
// replayed like a success.
type Declined struct {
	// Kind is the problem's short name, such as "insufficient-funds".
	Kind string
	// Title and Detail describe it for people.
	Title, Detail string
}

func (d *Declined) Error() string { return d.Kind + ": " + d.Detail }

// ApplyTransfer applies one transfer of amount cents from one account to
// another, as POST /transfers applies it, through the idempotency
// transaction ctx carries: run it as the work of idem.Guard.Do on the
// ledger's store (sqlitestore or pgstore), so that the transfer and the
// key's record commit together. It is how transports other than HTTP (the
// gRPC transfer of package idemgrpc's tests) reach the same transfer.
//
// A refusal is returned as a *Declined with nothing written; any other
// error (the database failed, or the work outlasted Config.RequestTimeout)
// means the transaction must be rolled back.
func (s *Service) ApplyTransfer(ctx context.Context, from, to string, amount int64) (Transfer, *Declined, error) {
	q, ok := s.db.current(ctx)
	if !ok {
		return Transfer{}, nil, errors.New("transfers: ApplyTransfer runs inside idem.Guard.Do on the ledger's store: the context carries no transaction of it")
	}
	if !validAccountID(from) || !validAccountID(to) {
		return Transfer{}, &Declined{"invalid-account-id", "Invalid account id", "from and to must be account ids: " + invalidIDDetail}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	t, no, err := s.transfer(ctx, q, transferRequest{From: from, To: to, Amount: amount}, origin{})
	if no != nil {
		return Transfer{}, &Declined{no.kind, no.title, no.detail}, nil
	}
	return t, nil, err
}
