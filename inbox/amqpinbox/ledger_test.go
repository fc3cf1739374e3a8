package amqpinbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// The tests' ledger: two accounts, a and b, and a log of the messages
// applied, with no uniqueness of its own, so that an effect applied twice
// shows as two rows rather than as a constraint error.
const (
	ledgerSchema = `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL);
CREATE TABLE applied (message_id TEXT NOT NULL, amount BIGINT NOT NULL);
INSERT INTO accounts VALUES ('a', 1000000), ('b', 0)`
	initialBalance = 1000000
)

// transferBody is a message's payload.
type transferBody struct {
	Amount   int64  `json:"amount"`
	Ref      string `json:"ref,omitempty"` // a business id, for Config.MessageID
	From, To string `json:",omitempty"`    // accounts; a and b when empty
}

// ledger is one database under test: the store the inbox records ids in,
// and the ledger the handler writes to in the same transaction.
type ledger struct {
	name  string
	store idem.Store
	// exec runs a statement in the inbox's transaction that ctx carries.
	exec func(ctx context.Context, query string, args ...any) error
	// reopen opens the database anew (another process used it).
	reopen func(t testing.TB) *ledger
	close  func()
	where  string // the DSN or file, for a child process
}

// databases is the kinds of ledger every exactly-once test runs on.
var databases = []struct {
	name string
	open func(t testing.TB) *ledger
}{
	{"PostgreSQL", newPGLedger},
	{"SQLite", newSQLiteLedger},
}

func newPGLedger(t testing.TB) *ledger {
	t.Helper()
	_, dsn := pgtest.Schema(t)
	// More connections than any test or benchmark runs transactions at
	// once (pgxpool's default is 4 on this machine).
	if strings.Contains(dsn, "://") {
		dsn += "&pool_max_conns=16"
	} else {
		dsn += " pool_max_conns=16"
	}
	l := openPGLedger(t, dsn)
	for _, q := range strings.Split(ledgerSchema, ";\n") {
		if _, err := l.store.(*pgstore.Store).Pool().Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func openPGLedger(t testing.TB, dsn string) *ledger {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &ledger{
		name:  "PostgreSQL",
		store: s,
		where: dsn,
		exec: func(ctx context.Context, q string, args ...any) error {
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return errors.New("no pgstore transaction in ctx")
			}
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		reopen: func(t testing.TB) *ledger { return openPGLedger(t, dsn) },
		close:  func() { s.Close() },
	}
}

func newSQLiteLedger(t testing.TB) *ledger {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l := openSQLiteLedger(t, path)
	if _, err := l.store.(*sqlitestore.Store).DB().Exec(ledgerSchema); err != nil {
		t.Fatal(err)
	}
	return l
}

func openSQLiteLedger(t testing.TB, path string) *ledger {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &ledger{
		name:  "SQLite",
		store: s,
		where: path,
		exec: func(ctx context.Context, q string, args ...any) error {
			tx, ok := sqlitestore.TxFrom(ctx)
			if !ok {
				return errors.New("no sqlitestore transaction in ctx")
			}
			_, err := tx.ExecContext(ctx, strings.ReplaceAll(q, "$", "?"), args...)
			return err
		},
		reopen: func(t testing.TB) *ledger { return openSQLiteLedger(t, path) },
		close:  func() { s.Close() },
	}
}

// transfer is the tests' handler: it moves the message's amount from a to
// b and logs the message, in the inbox's transaction.
func (l *ledger) transfer(ctx context.Context, m *inbox.Message) error {
	return transferIn(m, func(q string, args ...any) error { return l.exec(ctx, q, args...) })
}

// transferIn moves the message's amount from a to b and logs the message,
// through exec: the tests' handler, in whatever transaction exec runs in.
func transferIn(m *inbox.Message, exec func(q string, args ...any) error) error {
	var body transferBody
	if err := json.Unmarshal(m.Body, &body); err != nil {
		return inbox.Refuse(fmt.Errorf("malformed transfer: %w", err))
	}
	if body.Amount <= 0 {
		return inbox.Refuse(fmt.Errorf("amount must be positive, got %d", body.Amount))
	}
	from, to, amount := cmp.Or(body.From, "a"), cmp.Or(body.To, "b"), body.Amount
	// In id order, so that concurrent transfers never deadlock.
	first, second, delta := from, to, -amount
	if to < from {
		first, second, delta = to, from, amount
	}
	if err := exec(`UPDATE accounts SET balance = balance + $1 WHERE id = $2`, delta, first); err != nil {
		return err
	}
	if err := exec(`UPDATE accounts SET balance = balance + $1 WHERE id = $2`, -delta, second); err != nil {
		return err
	}
	return exec(`INSERT INTO applied (message_id, amount) VALUES ($1, $2)`, m.ID, body.Amount)
}

// insertAccount adds an account with a large balance, for benchmarks.
func (l *ledger) insertAccount(id string) error {
	const q = `INSERT INTO accounts VALUES ($1, 1000000000)`
	switch s := l.store.(type) {
	case *pgstore.Store:
		_, err := s.Pool().Exec(context.Background(), q, id)
		return err
	case *sqlitestore.Store:
		_, err := s.DB().Exec(strings.ReplaceAll(q, "$", "?"), id)
		return err
	}
	return fmt.Errorf("insertAccount: unknown store %T", l.store)
}

// audit reads the ledger: how often each message was applied, and the two
// balances.
func (l *ledger) audit(t testing.TB) (applied map[string]int, a, b int64) {
	t.Helper()
	ctx := context.Background()
	applied = map[string]int{}
	switch s := l.store.(type) {
	case *pgstore.Store:
		rows, err := s.Pool().Query(ctx, `SELECT message_id FROM applied`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			applied[id]++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Pool().QueryRow(ctx, `SELECT (SELECT balance FROM accounts WHERE id = 'a'), (SELECT balance FROM accounts WHERE id = 'b')`).Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
	case *sqlitestore.Store:
		rows, err := s.DB().QueryContext(ctx, `SELECT message_id FROM applied`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			applied[id]++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.DB().QueryRowContext(ctx, `SELECT (SELECT balance FROM accounts WHERE id = 'a'), (SELECT balance FROM accounts WHERE id = 'b')`).Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("audit: unknown store %T", l.store)
	}
	return applied, a, b
}

// checkOnce fails t unless each of want (message id → amount) was applied
// exactly once, nothing else was, and the money moved is their sum.
func (l *ledger) checkOnce(t testing.TB, want map[string]int64) {
	t.Helper()
	applied, a, b := l.audit(t)
	var sum int64
	for id, amount := range want {
		sum += amount
		if n := applied[id]; n != 1 {
			t.Errorf("%s: message %s applied %d times, want 1", l.name, id, n)
		}
	}
	for id, n := range applied {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: message %s applied %d times, want 0", l.name, id, n)
		}
	}
	if a+b != initialBalance {
		t.Errorf("%s: money not conserved: a=%d b=%d, sum %d, want %d", l.name, a, b, a+b, initialBalance)
	}
	if b != sum {
		t.Errorf("%s: b=%d, want %d (the sum of the messages applied)", l.name, b, sum)
	}
}
