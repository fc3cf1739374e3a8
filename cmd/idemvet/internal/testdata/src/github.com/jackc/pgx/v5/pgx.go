// Package pgx is a stub for idemvet's tests.
package pgx

import "context"

type CommandTag struct{}

type Rows interface{ Close() }

type Row interface{ Scan(dest ...any) error }

type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) (CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) Row
	Commit(ctx context.Context) error
}

type Conn struct{}

func (c *Conn) Exec(ctx context.Context, sql string, args ...any) (CommandTag, error) {
	return CommandTag{}, nil
}
func (c *Conn) Query(ctx context.Context, sql string, args ...any) (Rows, error) { return nil, nil }
func (c *Conn) QueryRow(ctx context.Context, sql string, args ...any) Row        { return nil }
func (c *Conn) Begin(ctx context.Context) (Tx, error)                            { return nil, nil }
