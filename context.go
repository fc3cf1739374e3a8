package idem

import "context"

type txKey struct{}

// WithTx returns a context that carries tx: the context Guard.Do passes to
// the work. Code that drives a Store's Tx directly, such as the storetest
// suite, uses it to give a work-like function the same context.
func WithTx(ctx context.Context, tx Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFrom returns the transaction that the work passed to Guard.Do runs in,
// and whether there is one. Store packages wrap it in a typed accessor that
// returns the driver's own transaction type.
func TxFrom(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(Tx)
	return tx, ok
}
