package mysqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
)

// database/sql begins a transaction with a round trip of its own (START
// TRANSACTION) and ends it with another (COMMIT or ROLLBACK). On the
// connections that Open makes, Begin's transaction does without both:
// Begin's CALL begins it, Commit's CALL commits it, and the *sql.Tx the
// work sees only follows. Every other transaction on those connections
// (yours through Store.DB(), leased mode's) is go-sql-driver's own.
//
// deferredConnector wraps go-sql-driver's connector so that BeginTx, given
// a context that carries a *deferredTx, sends nothing, and leaves the
// transaction to the store's statements.

type deferredConnector struct{ driver.Connector }

func (c deferredConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &deferredConn{conn}, nil
}

// deferredTx is the state of one transaction that Begin's CALL begins.
// open: the server may hold it open (until the CALL says otherwise, it
// may); committed: Commit's CALL committed it.
type deferredTx struct {
	conn      *deferredConn
	open      bool
	committed bool
}

type deferredKey struct{}

// withDeferredTx returns ctx carrying d: a BeginTx under it sends nothing.
func withDeferredTx(ctx context.Context, d *deferredTx) context.Context {
	return context.WithValue(ctx, deferredKey{}, d)
}

// Commit ends the *sql.Tx; it sends COMMIT only when no CALL committed a
// transaction that may be open.
func (d *deferredTx) Commit() error {
	if d.committed || !d.open {
		return nil
	}
	return d.conn.exec("COMMIT")
}

// Rollback ends the *sql.Tx; it sends ROLLBACK when a transaction may be
// open.
func (d *deferredTx) Rollback() error {
	if d.committed || !d.open {
		return nil
	}
	return d.conn.exec("ROLLBACK")
}

// deferredConn is go-sql-driver's connection with a BeginTx that defers to
// the store when asked. Every other method is the driver's.
type deferredConn struct{ driver.Conn }

var (
	_ driver.ConnBeginTx        = (*deferredConn)(nil)
	_ driver.ConnPrepareContext = (*deferredConn)(nil)
	_ driver.ExecerContext      = (*deferredConn)(nil)
	_ driver.QueryerContext     = (*deferredConn)(nil)
	_ driver.Pinger             = (*deferredConn)(nil)
	_ driver.NamedValueChecker  = (*deferredConn)(nil)
	_ driver.SessionResetter    = (*deferredConn)(nil)
	_ driver.Validator          = (*deferredConn)(nil)
)

var errNoBeginTx = errors.New("mysqlstore: the driver's connection has no BeginTx")

func (c *deferredConn) exec(query string) error {
	_, err := c.ExecContext(context.Background(), query, nil)
	return err
}

func (c *deferredConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if d, ok := ctx.Value(deferredKey{}).(*deferredTx); ok && opts == (driver.TxOptions{}) {
		d.conn, d.open = c, true
		return d, nil
	}
	b, ok := c.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errNoBeginTx
	}
	return b.BeginTx(ctx, opts)
}

func (c *deferredConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c *deferredConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return e.ExecContext(ctx, query, args)
}

func (c *deferredConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return q.QueryContext(ctx, query, args)
}

func (c *deferredConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *deferredConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *deferredConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *deferredConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}
