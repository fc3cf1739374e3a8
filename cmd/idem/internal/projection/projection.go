package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// Projection keeps per-account totals of the transfer events it applies.
// It is safe for concurrent use.
type Projection struct {
	db *database
}

// SQLite returns the projection on the SQLite store its inbox records
// event ids in.
func SQLite(store *sqlitestore.Store) *Projection { return &Projection{db: sqliteDatabase(store)} }

// Postgres returns the projection on the PostgreSQL store its inbox
// records event ids in (its tables in the connection's current schema).
func Postgres(store *pgstore.Store) *Projection { return &Projection{db: postgresDatabase(store)} }

// MySQL returns the projection on the MySQL or MariaDB store its inbox
// records event ids in (its tables in the store's database).
func MySQL(store *mysqlstore.Store) *Projection { return &Projection{db: mysqlDatabase(store)} }

// Migrate creates the projection's tables if they are missing.
func (p *Projection) Migrate(ctx context.Context) error {
	if err := p.db.migrate(ctx, p.db.schema); err != nil {
		return fmt.Errorf("projection: migrate: %w", err)
	}
	return nil
}

// Apply is an inbox.Handler: it applies one transfer event (the JSON of
// transfers.Event) through the inbox's transaction that ctx carries: a row
// in the applied list, the amount added to the debits of the transfer's
// source and to the credits of its destination. An event that can never
// apply (malformed JSON, no event_id or one unlike the message id, a
// transfer id or amount that is not positive, an account missing) is
// refused with inbox.Refuse, and the inbox settles it; a database error
// has it delivered again.
func (p *Projection) Apply(ctx context.Context, m *inbox.Message) error {
	var e transfers.Event
	if err := json.Unmarshal(m.Body, &e); err != nil {
		return inbox.Refuse(fmt.Errorf("malformed event: %w", err))
	}
	switch {
	case e.EventID == "" || e.EventID != m.ID:
		return inbox.Refuse(fmt.Errorf("event_id %q is not the message id", e.EventID))
	case e.ID <= 0:
		return inbox.Refuse(fmt.Errorf("transfer id %d is not positive", e.ID))
	case e.Amount <= 0:
		return inbox.Refuse(fmt.Errorf("amount %d is not positive", e.Amount))
	case e.From == "" || e.To == "":
		return inbox.Refuse(errors.New("the event names no source or no destination account"))
	}
	for _, s := range []struct {
		q    string
		args []any
	}{
		{p.db.sql.applied, []any{e.ID, e.EventID}},
		{p.db.sql.debit, []any{e.From, e.Amount}},
		{p.db.sql.credit, []any{e.To, e.Amount}},
	} {
		ok, err := p.db.exec(ctx, s.q, s.args...)
		if !ok {
			return errors.New("projection: Apply runs inside inbox.Process on the projection's store: the context carries no transaction of it")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Applied returns the transfer ids of the events applied, in the order
// they were applied: one entry per event.
func (p *Projection) Applied(ctx context.Context) ([]int64, error) {
	ids := []int64{}
	err := p.db.query(ctx, p.db.sql.list, func(s scanner) error {
		var id int64
		err := s.Scan(&id)
		ids = append(ids, id)
		return err
	})
	if err != nil && !errors.Is(err, errNotFound) {
		return nil, err
	}
	return ids, nil
}

// Account is an account's totals in the read model.
type Account struct {
	ID      string `json:"id"`
	Debits  int64  `json:"debits"`
	Credits int64  `json:"credits"`
}

// ErrUnknownAccount is Account's error for an account no applied event
// named.
var ErrUnknownAccount = errors.New("projection: no event names this account")

// Account returns an account's totals.
func (p *Projection) Account(ctx context.Context, id string) (Account, error) {
	a := Account{ID: id}
	err := p.db.query(ctx, p.db.sql.account, func(s scanner) error {
		return s.Scan(&a.Debits, &a.Credits)
	}, id)
	if errors.Is(err, errNotFound) {
		return a, ErrUnknownAccount
	}
	return a, err
}
