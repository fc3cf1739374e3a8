package transfers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/idemkit/idem/idemwebhook"
)

// Deposit is a deposit's JSON form: money that arrived from outside,
// announced by a signed webhook.
type Deposit struct {
	DepositID string `json:"deposit_id"`
	WebhookID string `json:"webhook_id"`
	Account   string `json:"account"`
	Amount    int64  `json:"amount"`
}

// DepositList is the JSON form of GET /deposits.
type DepositList struct {
	Count    int       `json:"count"`
	Deposits []Deposit `json:"deposits"`
}

// DepositEvent is the type of the webhook event that credits an account.
const DepositEvent = "deposit.created"

// DepositsEndpoint is the Endpoint of POST /webhooks/deposits' receiver:
// its deliveries are recorded under the scope "webhook/standard/deposits".
const DepositsEndpoint = "deposits"

// maxDepositID bounds a deposit_id, so that no answer grows with it.
const maxDepositID = 255

// depositEvent is the body of a delivery to POST /webhooks/deposits.
type depositEvent struct {
	Type string `json:"type"`
	Data struct {
		DepositID string `json:"deposit_id"`
		Account   string `json:"account"`
		Amount    int64  `json:"amount"`
	} `json:"data"`
}

// depositsDDL is the deposits table on PostgreSQL (on MySQL, through
// mysqlRewrites).
const depositsDDL = `CREATE TABLE IF NOT EXISTS deposits (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	deposit_id TEXT   NOT NULL,
	webhook_id TEXT   NOT NULL UNIQUE,
	account    TEXT   NOT NULL REFERENCES accounts (id),
	amount     BIGINT NOT NULL CHECK (amount > 0),
	created_at BIGINT NOT NULL
)`

// insertDeposit records a deposit unless its webhook id has one.
const insertDeposit = `INSERT INTO deposits (deposit_id, webhook_id, account, amount, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (webhook_id) DO NOTHING`

// migrateDeposits creates the deposits table if it is missing. Its
// webhook_id is unique: a delivery whose record has expired (a redelivery
// later than the idempotency TTL) finds its deposit there and credits
// nothing again.
func (db *Database) migrateDeposits(ctx context.Context) error {
	ddl := depositsDDL
	if db.schema == sqliteSchema {
		ddl = `CREATE TABLE IF NOT EXISTS deposits (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	deposit_id TEXT    NOT NULL,
	webhook_id TEXT    NOT NULL UNIQUE,
	account    TEXT    NOT NULL REFERENCES accounts (id),
	amount     INTEGER NOT NULL CHECK (amount > 0),
	created_at INTEGER NOT NULL
)`
	}
	if _, err := db.pool.exec(ctx, ddl); err != nil {
		return fmt.Errorf("create deposits: %w", err)
	}
	return nil
}

// routeDeposits registers GET /deposits, and POST /webhooks/deposits when
// the service has webhook secrets.
func (s *Service) routeDeposits(mux *http.ServeMux) error {
	mux.HandleFunc("GET /deposits", s.listDeposits)
	if len(s.cfg.WebhookSecrets) == 0 {
		return nil
	}
	if s.cfg.Guard == nil {
		return errors.New("transfers: Config.WebhookSecrets needs Config.Guard: a webhook is received exactly once, or not at all")
	}
	v, err := idemwebhook.NewStandard(s.cfg.WebhookSecrets...)
	if err != nil {
		return fmt.Errorf("transfers: Config.WebhookSecrets: %w", err)
	}
	receive := idemwebhook.New(s.cfg.Guard, v, &idemwebhook.Config{
		Endpoint: DepositsEndpoint, MaxBody: maxBody, Logger: s.cfg.Logger, Observer: s.cfg.WebhookObserver,
	})
	mux.Handle("POST /webhooks/deposits", receive(http.HandlerFunc(s.receiveDeposit)))
	return nil
}

// receiveDeposit applies a verified delivery in the idempotency
// transaction: a deposit.created credits its account once; any other type
// is acknowledged and ignored. Every answer below 500 is recorded with the
// delivery, so that a redelivery gets it again.
func (s *Service) receiveDeposit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var ev depositEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		problem(w, http.StatusBadRequest, "malformed-json", "Malformed JSON", err.Error())
		return
	}
	if ev.Type != DepositEvent {
		writeJSON(w, http.StatusOK, map[string]any{"ignored": true, "type": ev.Type})
		return
	}
	d := Deposit{DepositID: ev.Data.DepositID, WebhookID: idemwebhook.DeliveryID(r), Account: ev.Data.Account, Amount: ev.Data.Amount}
	switch {
	case d.DepositID == "" || len(d.DepositID) > maxDepositID:
		problem(w, http.StatusUnprocessableEntity, "invalid-deposit-id", "Invalid deposit id", "deposit_id must be 1 to 255 bytes")
		return
	case d.Amount <= 0:
		problem(w, http.StatusUnprocessableEntity, "invalid-amount", "Invalid amount", "amount must be a positive integer number of cents")
		return
	case !validAccountID(d.Account):
		problem(w, http.StatusUnprocessableEntity, "unknown-account", "Unknown account", invalidIDDetail)
		return
	}
	ctx, cancel := s.work(r)
	defer cancel()
	q, ok := s.db.current(ctx)
	if !ok {
		s.fail(w, r, errors.New("no idempotency transaction in the request context"))
		return
	}
	no, err := s.deposit(ctx, q, d)
	switch {
	case err != nil:
		s.fail(w, r, err) // 5xx: rolled back, answered 503, retried by the provider
	case no != nil:
		problem(w, http.StatusUnprocessableEntity, no.kind, no.title, no.detail)
	default:
		writeJSON(w, http.StatusOK, d)
	}
}

// deposit credits d.Account with d.Amount and records d, through q. A
// webhook id already in the ledger credits nothing again.
func (s *Service) deposit(ctx context.Context, q querier, d Deposit) (*declined, error) {
	var balance int64
	err := q.queryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, d.Account).Scan(&balance)
	if errors.Is(err, errNoRows) {
		return &declined{"unknown-account", "Unknown account", fmt.Sprintf("no account %q", d.Account)}, nil
	}
	if err != nil {
		return nil, err
	}
	if balance > math.MaxInt64-d.Amount {
		return &declined{"balance-overflow", "Balance overflow", fmt.Sprintf("account %q cannot hold %d more cents", d.Account, d.Amount)}, nil
	}
	n, err := q.exec(ctx,
		insertDeposit,
		d.DepositID, d.WebhookID, d.Account, d.Amount, s.cfg.Now().UnixNano())
	if err != nil || n == 0 {
		return nil, err
	}
	_, err = q.exec(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, d.Amount, d.Account)
	return nil, err
}

// listDeposits answers GET /deposits: every deposit, oldest first, as a
// DepositList, streamed by streamList as GET /transfers is.
func (s *Service) listDeposits(w http.ResponseWriter, r *http.Request) {
	q := `SELECT deposit_id, webhook_id, account, amount FROM deposits ORDER BY id`
	s.streamList(w, r, "deposits", q, nil, func(rs rows) (any, error) {
		var d Deposit
		err := rs.Scan(&d.DepositID, &d.WebhookID, &d.Account, &d.Amount)
		return d, err
	})
}
