package transfers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/jackc/pgx/v5"
)

// consumer is a ledger served over HTTP that also applies transfer
// commands through an inbox, as idem serve -consume does.
type consumer struct {
	client
	svc   *transfers.Service
	inbox *inbox.Inbox
}

func consumerSetup(t *testing.T, store idem.Store, db *transfers.Database, cfg *transfers.Config) consumer {
	t.Helper()
	if cfg == nil {
		cfg = &transfers.Config{}
	}
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Guard = g
	svc, err := transfers.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := inbox.New(store, &inbox.Config{Name: "transfers"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	c := consumer{client{t, srv.URL}, svc, ib}
	for id, bal := range map[string]int{"alice": 10000, "bob": 0} {
		if r := c.do("PUT", "/accounts/"+id, "", "", fmt.Sprintf(`{"balance":%d}`, bal)); r.status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, r.status, r.body)
		}
	}
	return c
}

// deliver processes one delivery of a message with the service's handler.
func (c consumer) deliver(id, body string, attempt int) (inbox.Outcome, error) {
	return c.inbox.Process(context.Background(), &inbox.Message{ID: id, Body: []byte(body), Attempt: attempt}, c.svc.ApplyMessage)
}

// rawTransfers returns GET /transfers's transfers as JSON objects, so
// that a member's absence shows.
func (c consumer) rawTransfers() []map[string]any {
	c.t.Helper()
	r := c.do("GET", "/transfers", "", "", "")
	var l struct{ Transfers []map[string]any }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil {
		c.t.Fatalf("GET /transfers: %d %s", r.status, r.body)
	}
	return l.Transfers
}

func TestMessagesApplyTransfersOnce(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, db := b.open(t)
			c := consumerSetup(t, store, db, nil)
			const id = "cmd 1/ünï" // kept exactly as published, though not a valid key
			body := `{"from":"alice","to":"bob","amount":250}`
			if o, err := c.deliver(id, body, 1); o != inbox.Applied {
				t.Fatalf("first delivery: %s %v, want applied", o, err)
			}
			for attempt := 2; attempt <= 3; attempt++ {
				if o, err := c.deliver(id, body, attempt); o != inbox.Duplicate {
					t.Errorf("redelivery %d: %s %v, want duplicate", attempt, o, err)
				}
			}
			// Over HTTP too, in the same process.
			if r := c.do("POST", "/transfers", "http-1", "", `{"from":"alice","to":"bob","amount":50}`); r.status != 201 || strings.Contains(r.body, "message_id") {
				t.Fatalf("POST /transfers: %d %s, want 201 without message_id", r.status, r.body)
			}
			if a, b := c.balance("alice"), c.balance("bob"); a != 9700 || b != 300 {
				t.Errorf("balances = %d, %d; want 9700, 300", a, b)
			}
			list := c.rawTransfers()
			if len(list) != 2 {
				t.Fatalf("GET /transfers lists %d transfers, want 2: %v", len(list), list)
			}
			if got := list[0]["message_id"]; got != id || list[0]["amount"] != 250.0 {
				t.Errorf("the message's transfer = %v, want message_id %q and amount 250", list[0], id)
			}
			if _, ok := list[1]["message_id"]; ok {
				t.Errorf("the HTTP transfer = %v, want no message_id member", list[1])
			}
			for i, want := range []any{id, nil} {
				r := c.do("GET", fmt.Sprintf("/transfers/%v", list[i]["id"]), "", "", "")
				var one map[string]any
				if r.status != 200 || json.Unmarshal([]byte(r.body), &one) != nil || one["message_id"] != want {
					t.Errorf("GET /transfers/%v: %d %s, want message_id %v", list[i]["id"], r.status, r.body, want)
				}
			}
		})
	}
}

func TestRefusedCommandsAreSettled(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, db := b.open(t)
			c := consumerSetup(t, store, db, nil)
			c.do("PUT", "/accounts/rich", "", "", `{"balance":9223372036854775807}`)
			for _, tc := range []struct{ name, id, body, reason string }{
				{"Malformed", "m-1", `{"from":`, "malformed-json"},
				{"NotJSON", "m-2", `transfer 5 to bob`, "malformed-json"},
				{"TrailingData", "m-3", `{"from":"alice","to":"bob","amount":1} {}`, "malformed-json"},
				{"NonIntegerAmount", "m-4", `{"from":"alice","to":"bob","amount":1.5}`, "malformed-json"},
				{"InvalidAccountID", "m-5", `{"from":"al ice","to":"bob","amount":1}`, "invalid-account-id"},
				{"MissingAccount", "m-6", `{"to":"bob","amount":1}`, "invalid-account-id"},
				{"UnknownAccount", "m-7", `{"from":"alice","to":"carol","amount":1}`, "unknown-account"},
				{"ZeroAmount", "m-8", `{"from":"alice","to":"bob","amount":0}`, "invalid-amount"},
				{"NegativeAmount", "m-9", `{"from":"alice","to":"bob","amount":-5}`, "invalid-amount"},
				{"SameAccount", "m-10", `{"from":"alice","to":"alice","amount":1}`, "same-account"},
				{"InsufficientFunds", "m-11", `{"from":"bob","to":"alice","amount":1}`, "insufficient-funds"},
				{"BalanceOverflow", "m-12", `{"from":"alice","to":"rich","amount":1}`, "balance-overflow"},
				{"TooLarge", "m-13", `{"from":"alice","to":"bob","amount":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`, "request-too-large"},
				{"MessageIDWithNUL", "m\x0014", `{"from":"alice","to":"bob","amount":1}`, "invalid-message-id"},
				{"MessageIDNotUTF8", "m\xff15", `{"from":"alice","to":"bob","amount":1}`, "invalid-message-id"},
				{"MessageIDTooLong", strings.Repeat("i", 1025), `{"from":"alice","to":"bob","amount":1}`, "invalid-message-id"},
			} {
				o, err := c.deliver(tc.id, tc.body, 1)
				if o != inbox.Refused || !errors.Is(err, inbox.ErrRefused) || !strings.Contains(fmt.Sprint(err), tc.reason) {
					t.Errorf("%s: %s %v, want refused with %s", tc.name, o, err, tc.reason)
				}
				if o, err := c.deliver(tc.id, tc.body, 2); o != inbox.Duplicate {
					t.Errorf("%s redelivered: %s %v, want duplicate", tc.name, o, err)
				}
			}
			if n := c.transfers().Count; n != 0 {
				t.Errorf("transfers = %d, want 0", n)
			}
			if a, b := c.balance("alice"), c.balance("bob"); a != 10000 || b != 0 {
				t.Errorf("balances = %d, %d; want untouched", a, b)
			}
			// A refusal is final: the funds arriving later do not apply it.
			c.do("PUT", "/accounts/bob", "", "", `{"balance":100}`)
			if o, _ := c.deliver("m-11", `{"from":"bob","to":"alice","amount":1}`, 3); o != inbox.Duplicate {
				t.Errorf("refused command after the funds arrived: %s, want duplicate", o)
			}
			// The longest message id that can be recorded is applied.
			if o, err := c.deliver(strings.Repeat("i", 1024), `{"from":"alice","to":"bob","amount":1}`, 1); o != inbox.Applied {
				t.Errorf("message id of 1024 bytes: %s %v, want applied", o, err)
			}
		})
	}
}

// ApplyMessage outside the inbox is a mistake in the program, not a
// property of the message: it must not settle the message.
func TestApplyMessageNeedsTheInboxTransaction(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "bank.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	svc, err := transfers.New(context.Background(), transfers.SQLite(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = svc.ApplyMessage(context.Background(), &inbox.Message{ID: "m", Body: []byte(`{"from":"a","to":"b","amount":1}`)})
	if err == nil || errors.Is(err, inbox.ErrRefused) {
		t.Errorf("ApplyMessage without a transaction: %v, want an error that is not a refusal", err)
	}
}

// A command whose transfer cannot finish (its account is locked past
// Config.RequestTimeout) is retried, not refused: it applies once the
// lock goes.
func TestBlockedCommandIsRetried(t *testing.T) {
	t.Parallel()
	store := openPostgres(t)
	c := consumerSetup(t, store, transfers.Postgres(store), &transfers.Config{RequestTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	conn, err := store.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	body := `{"from":"alice","to":"bob","amount":10}`
	o, err := c.deliver("blocked", body, 1)
	if o != inbox.Retry || err == nil || errors.Is(err, inbox.ErrRefused) {
		t.Errorf("delivery while the account is locked: %s %v, want retry", o, err)
	}
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatal(err)
	}
	// The timed-out attempt's server process may hold the key until
	// PostgreSQL notices its client is gone (after the lock wait ends),
	// so a redelivery may find the key in flight: that is a retry, as a
	// broker would redeliver. Bounded: 50 deliveries, 100 ms apart.
	var o2 inbox.Outcome
	for range 50 {
		o2, err = c.deliver("blocked", body, 2)
		if o2 != inbox.Retry || !errors.Is(err, idem.ErrInFlight) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if o2 != inbox.Applied {
		t.Errorf("redelivery: %s %v, want applied", o2, err)
	}
	if n := c.transfers().Count; n != 1 {
		t.Errorf("transfers = %d, want 1", n)
	}
}

// Several consumers deliver the same commands at once, beside HTTP
// transfers: each command applies once and money is conserved.
func TestConcurrentConsumersApplyEachCommandOnce(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, db := b.open(t)
			c := consumerSetup(t, store, db, nil)
			c.do("PUT", "/accounts/bob", "", "", `{"balance":10000}`)
			const commands, copies = 30, 3
			var wg sync.WaitGroup
			for w := range copies {
				wg.Go(func() {
					for i := range commands {
						from, to := "alice", "bob"
						if i%2 == 1 {
							from, to = to, from
						}
						body := fmt.Sprintf(`{"from":%q,"to":%q,"amount":%d}`, from, to, 1+i)
						for attempt := 1; attempt < 500; attempt++ {
							o, err := c.deliver(fmt.Sprint("cmd-", i), body, attempt)
							if o.Settled() {
								break
							}
							if o != inbox.Retry {
								t.Errorf("consumer %d, command %d: %s %v", w, i, o, err)
								break
							}
							time.Sleep(5 * time.Millisecond)
						}
					}
				})
			}
			wg.Go(func() {
				for i := range 10 {
					key := fmt.Sprint("http-", i)
					for range 100 {
						r := c.do("POST", "/transfers", key, "", `{"from":"alice","to":"bob","amount":7}`)
						if r.status != 409 && r.status != 503 {
							break
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
			wg.Wait()
			seen := map[string]int{}
			fromHTTP := 0
			for _, tr := range c.rawTransfers() {
				if id, ok := tr["message_id"].(string); ok {
					seen[id]++
				} else {
					fromHTTP++
				}
			}
			if len(seen) != commands || fromHTTP != 10 {
				t.Errorf("%d commands and %d HTTP transfers applied, want %d and 10", len(seen), fromHTTP, commands)
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("command %s applied %d times", id, n)
				}
			}
			if a, b := c.balance("alice"), c.balance("bob"); a+b != 20000 {
				t.Errorf("balances %d + %d = %d, want 20000 (money conserved)", a, b, a+b)
			}
		})
	}
}

// A ledger created before transfers had a message_id column gains it when
// the service starts: its transfers stay listed, without message_id, and
// new ones record theirs.
func TestExistingLedgerGainsMessageID(t *testing.T) {
	t.Parallel()
	const oldTransfers = `INSERT INTO accounts (id, balance) VALUES ('alice', 10000), ('bob', 0);
INSERT INTO transfers (src, dst, amount, created_at) VALUES ('alice', 'bob', 5, 1)`
	for _, tt := range []struct {
		name string
		open func(t *testing.T) (idem.Store, *transfers.Database)
	}{
		{"SQLite", func(t *testing.T) (idem.Store, *transfers.Database) {
			s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "old.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			_, err = s.DB().Exec(`CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));
CREATE TABLE transfers (id INTEGER PRIMARY KEY AUTOINCREMENT, src TEXT NOT NULL REFERENCES accounts (id),
	dst TEXT NOT NULL REFERENCES accounts (id), amount INTEGER NOT NULL CHECK (amount > 0), created_at INTEGER NOT NULL);` + oldTransfers)
			if err != nil {
				t.Fatal(err)
			}
			return s, transfers.SQLite(s)
		}},
		{"Postgres", func(t *testing.T) (idem.Store, *transfers.Database) {
			s := openPostgres(t)
			_, err := s.Pool().Exec(context.Background(), `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL CHECK (balance >= 0));
CREATE TABLE transfers (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, src TEXT NOT NULL REFERENCES accounts (id),
	dst TEXT NOT NULL REFERENCES accounts (id), amount BIGINT NOT NULL CHECK (amount > 0), created_at BIGINT NOT NULL);`+oldTransfers)
			if err != nil {
				t.Fatal(err)
			}
			return s, transfers.Postgres(s)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, db := tt.open(t)
			ib, err := inbox.New(store, &inbox.Config{Name: "transfers"})
			if err != nil {
				t.Fatal(err)
			}
			// Twice: a restart finds the column and leaves it.
			var svc *transfers.Service
			for range 2 {
				if svc, err = transfers.New(context.Background(), db, nil); err != nil {
					t.Fatalf("New on an existing ledger: %v", err)
				}
			}
			m := &inbox.Message{ID: "new-1", Body: []byte(`{"from":"alice","to":"bob","amount":7}`), Attempt: 1}
			if o, err := ib.Process(context.Background(), m, svc.ApplyMessage); o != inbox.Applied {
				t.Fatalf("Process: %s %v", o, err)
			}
			srv := httptest.NewServer(svc)
			t.Cleanup(srv.Close)
			c := consumer{client: client{t, srv.URL}}
			list := c.rawTransfers()
			if len(list) != 2 {
				t.Fatalf("transfers = %v, want 2", list)
			}
			if _, ok := list[0]["message_id"]; ok || list[0]["amount"] != 5.0 {
				t.Errorf("the old transfer = %v, want amount 5 without message_id", list[0])
			}
			if list[1]["message_id"] != "new-1" {
				t.Errorf("the new transfer = %v, want message_id new-1", list[1])
			}
		})
	}
}
