package idem

import "context"

type txKey struct{}

// withTx returns a context that carries tx: the context Guard.Do passes to
// the work.
func withTx(ctx context.Context, tx Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFrom returns the transaction that the work passed to Guard.Do runs in,
// and whether there is one. Store packages wrap it in a typed accessor that
// returns the driver's own transaction type.
func TxFrom(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(Tx)
	return tx, ok
}
