package bench

import (
	"context"
	"fmt"
)

// setup gives the bench accounts their balances (PUT is absolute, so a
// reused SQLite file starts from the same state) and counts the transfers
// already in the ledger.
func (r *runner) setup(ctx context.Context) error {
	for i := range numAccounts {
		if err := r.client.putAccount(ctx, r.idem.URL, accountID(i), initialBalance); err != nil {
			return fmt.Errorf("bench: setup: %w", err)
		}
	}
	if err := r.client.putAccount(ctx, r.idem.URL, stormSrc, initialBalance); err != nil {
		return fmt.Errorf("bench: setup: %w", err)
	}
	if err := r.client.putAccount(ctx, r.idem.URL, stormDst, 0); err != nil {
		return fmt.Errorf("bench: setup: %w", err)
	}
	n, err := r.b.transfers(ctx)
	if err != nil {
		return fmt.Errorf("bench: setup: count transfers: %w", err)
	}
	r.ledgerBefore = n
	return nil
}

// audit checks the ledger against what the clients were told: one
// transfer row per 201 that was not a replay, and money conserved.
func (r *runner) audit(ctx context.Context, rep *Report) error {
	n, err := r.b.transfers(ctx)
	if err != nil {
		return fmt.Errorf("bench: audit: count transfers: %w", err)
	}
	l := Ledger{Transfers: n - r.ledgerBefore, Created: r.created.Load()}
	var total int64
	for _, id := range append(accountIDs(), stormSrc, stormDst) {
		b, err := r.client.balance(ctx, r.idem.URL, id)
		if err != nil {
			return fmt.Errorf("bench: audit: %w", err)
		}
		total += b
	}
	l.Conserved = total == (numAccounts+1)*initialBalance
	rep.Ledger = l
	if l.Transfers != l.Created {
		r.problem("ledger: %d transfers were written, the clients were told %d were created", l.Transfers, l.Created)
	}
	if !l.Conserved {
		r.problem("ledger: the bench accounts hold %d cents, want %d", total, (numAccounts+1)*initialBalance)
	}
	return nil
}

func accountIDs() []string {
	ids := make([]string, numAccounts)
	for i := range ids {
		ids[i] = accountID(i)
	}
	return ids
}
