// Package pgstore is a stub for idemvet's tests.
package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

func TxFrom(ctx context.Context) (pgx.Tx, bool) { return nil, false }
