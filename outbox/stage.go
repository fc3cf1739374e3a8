package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"

	"github.com/idemkit/idem"
)

// ErrNoTx is returned by Stage outside a transaction that records a key:
// Stage never writes on its own.
var ErrNoTx = errors.New("outbox: Stage needs the transaction of idem.Guard.Do's work or of a Run.LocalStep (ctx carries none)")

// Stager is implemented by the transactions of the stores that keep an
// outbox (pgstore, pgstore/sqldb, sqlitestore): their atomic-mode
// idem.Tx and their local steps' idem.StepTx. Stage finds it in ctx.
type Stager interface {
	// OutboxIntent returns the intent the transaction records: the
	// stored scope and the key (the lease's in a local step).
	OutboxIntent() (scope, key string)
	// StageOutbox inserts msgs, in order, in the transaction, and arranges
	// for the store's relays to be woken once it commits. A message whose
	// ID is already staged (committed earlier, or earlier in this
	// transaction) is skipped: the first one stands.
	StageOutbox(ctx context.Context, msgs []Staged) error
}

var staged atomic.Uint64

// StagedCount returns how many messages Stage has written in this process
// since it started, those of transactions that rolled back afterwards
// included (the relay's Source counts what committed).
func StagedCount() uint64 { return staged.Load() }

// Stage writes msgs into the outbox through the transaction ctx carries:
// the transaction of idem.Guard.Do's work (and so of an idemhttp
// handler, an inbox handler, a batch row) or of a Run.LocalStep, on a
// store that implements Stager. They commit with the effect and the
// record, or not at all. Each gets the id ID(scope, key, Name) of the
// transaction's intent; staging a name the intent has already staged is a
// no-op. Outside such a transaction Stage returns an error matching
// ErrNoTx and writes nothing.
//
// Two messages of one call must have distinct names. A failed Stage
// leaves the transaction in the state the store's error left it (on
// PostgreSQL, aborted): return the error from the work.
func Stage(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	st, err := StagerFrom(ctx)
	if err != nil {
		return err
	}
	scope, key := st.OutboxIntent()
	rows := make([]Staged, len(msgs))
	names := make(map[string]struct{}, len(msgs))
	for i := range msgs {
		m := msgs[i]
		if err := m.check(); err != nil {
			return err
		}
		if _, dup := names[m.Name]; dup {
			return fmt.Errorf("outbox: Stage: two messages are named %q", m.Name)
		}
		names[m.Name] = struct{}{}
		m.Body = append([]byte(nil), m.Body...)
		m.Headers = maps.Clone(m.Headers)
		rows[i] = Staged{ID: ID(scope, key, m.Name), Scope: scope, Key: key, Message: m}
	}
	if err := st.StageOutbox(ctx, rows); err != nil {
		return fmt.Errorf("outbox: stage: %w", err)
	}
	staged.Add(uint64(len(rows)))
	return nil
}

// StagerFrom returns the Stager of the transaction ctx carries: the
// idem.Tx of idem.TxFrom, or what it wraps (a transaction with an
// Unwrap() idem.Tx method, such as idemotel's, or a local step's
// StepTx() idem.StepTx). It returns an error matching ErrNoTx when ctx
// carries no transaction.
func StagerFrom(ctx context.Context) (Stager, error) {
	tx, ok := idem.TxFrom(ctx)
	if !ok {
		return nil, ErrNoTx
	}
	var v any = tx
	for range 16 {
		if s, ok := v.(Stager); ok {
			return s, nil
		}
		switch w := v.(type) {
		case interface{ Unwrap() idem.Tx }:
			v = w.Unwrap()
		case interface{ StepTx() idem.StepTx }:
			v = w.StepTx()
		default:
			return nil, fmt.Errorf("outbox: the transaction in ctx (%T) belongs to a store without an outbox (pgstore, pgstore/sqldb and sqlitestore have one)", v)
		}
	}
	return nil, fmt.Errorf("outbox: the transaction in ctx (%T) wraps too deep", tx)
}
