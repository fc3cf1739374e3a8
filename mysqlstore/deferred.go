package mysqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
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
	return &deferredConn{Conn: conn}, nil
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
	d.conn.endTx()
	if d.committed || !d.open {
		return nil
	}
	return d.conn.exec("COMMIT")
}

// Rollback ends the *sql.Tx; it sends ROLLBACK when a transaction may be
// open.
func (d *deferredTx) Rollback() error {
	d.conn.endTx()
	if d.committed || !d.open {
		return nil
	}
	return d.conn.exec("ROLLBACK")
}

// deferredConn is go-sql-driver's connection with a BeginTx that defers to
// the store when asked, and that refuses the statements of a transaction
// after a deadlock (see aborted). Every other method is the driver's.
type deferredConn struct {
	driver.Conn

	// inTx: a transaction begun by BeginTx has not ended. aborted: a
	// statement of it failed with a deadlock (error 1213), after which
	// InnoDB has rolled the whole transaction back and the session is
	// in autocommit again: a statement sent now would commit on its
	// own, outside the transaction, so it is refused (as PostgreSQL
	// refuses the statements of an aborted transaction) until the
	// transaction's Commit or Rollback. A connection is used by one
	// goroutine at a time.
	inTx    bool
	aborted error
}

// errAborted is what a statement of a transaction that a deadlock rolled
// back gets instead of running.
var errAborted = errors.New("mysqlstore: the transaction was rolled back by a deadlock (error 1213); its statements are refused until it ends: return the error from the work, do not retry a statement inside it")

func (c *deferredConn) endTx() { c.inTx, c.aborted = false, nil }

// check refuses a statement of an aborted transaction.
func (c *deferredConn) check() error {
	if c.aborted != nil {
		return fmt.Errorf("%w (after: %w)", errAborted, c.aborted)
	}
	return nil
}

// seen notes err, a statement's error: a deadlock in a transaction aborts
// it.
func (c *deferredConn) seen(err error) {
	if c.inTx && c.aborted == nil && isErr(err, errLockDeadlock) {
		c.aborted = err
	}
}

// driverTx is a transaction of go-sql-driver's own on a deferredConn.
type driverTx struct {
	driver.Tx
	c *deferredConn
}

func (t driverTx) Commit() error   { t.c.endTx(); return t.Tx.Commit() }
func (t driverTx) Rollback() error { t.c.endTx(); return t.Tx.Rollback() }

// abortStmt is a prepared statement of a deferredConn: its executions are
// checked and seen as the connection's statements are.
type abortStmt struct {
	driver.Stmt
	c *deferredConn
}

var (
	_ driver.StmtExecContext   = abortStmt{}
	_ driver.StmtQueryContext  = abortStmt{}
	_ driver.NamedValueChecker = abortStmt{}
)

func (s abortStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.c.check(); err != nil {
		return nil, err
	}
	e, ok := s.Stmt.(driver.StmtExecContext)
	if !ok {
		return nil, errors.New("mysqlstore: the driver's statement has no ExecContext")
	}
	r, err := e.ExecContext(ctx, args)
	s.c.seen(err)
	return r, err
}

func (s abortStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.c.check(); err != nil {
		return nil, err
	}
	q, ok := s.Stmt.(driver.StmtQueryContext)
	if !ok {
		return nil, errors.New("mysqlstore: the driver's statement has no QueryContext")
	}
	r, err := q.QueryContext(ctx, args)
	s.c.seen(err)
	return r, err
}

func (s abortStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv)
}

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
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return errors.New("mysqlstore: the driver's connection has no ExecContext")
	}
	_, err := e.ExecContext(context.Background(), query, nil)
	return err
}

func (c *deferredConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if d, ok := ctx.Value(deferredKey{}).(*deferredTx); ok && opts == (driver.TxOptions{}) {
		d.conn, d.open = c, true
		c.inTx, c.aborted = true, nil
		return d, nil
	}
	b, ok := c.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errNoBeginTx
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx, c.aborted = true, nil
	return driverTx{tx, c}, nil
}

func (c *deferredConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var (
		st  driver.Stmt
		err error
	)
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.Conn.Prepare(query)
	}
	c.seen(err)
	if err != nil {
		return nil, err
	}
	return abortStmt{st, c}, nil
}

func (c *deferredConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	r, err := e.ExecContext(ctx, query, args)
	c.seen(err)
	return r, err
}

func (c *deferredConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	r, err := q.QueryContext(ctx, query, args)
	c.seen(err)
	return r, err
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
	// database/sql ends a transaction before it reuses the connection;
	// a connection back in the pool holds none.
	c.endTx()
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
