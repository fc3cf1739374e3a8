package transfers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// Config configures a Service. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Guard protects POST /transfers. Nil runs the service without
	// idempotency: keys are ignored and every request runs in its own
	// transaction. Defaults to nil.
	Guard *idem.Guard

	// Observer is told the outcome of every protected request (see
	// idemhttp.Config.Observer). Defaults to none.
	Observer idemhttp.Observer

	// Metrics, when set, is served at GET /metrics. Defaults to none.
	Metrics http.Handler

	// Logger receives the service's log lines. Defaults to slog.Default().
	Logger *slog.Logger

	// Now returns the time stamped on transfers. Defaults to time.Now.
	Now func() time.Time
}

// Service is the transfers service. Its handler is safe for concurrent use.
type Service struct {
	db      *Database
	cfg     Config
	handler http.Handler
}

// New creates the ledger's tables if needed and returns the service.
func New(ctx context.Context, db *Database, cfg *Config) (*Service, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if _, err := db.pool.exec(ctx, db.schema); err != nil {
		return nil, fmt.Errorf("transfers: create schema: %w", err)
	}
	s := &Service{db: db, cfg: c}

	mux := http.NewServeMux()
	mux.HandleFunc("PUT /accounts/{id}", s.putAccount)
	mux.HandleFunc("GET /accounts/{id}", s.getAccount)
	mux.HandleFunc("GET /transfers", s.listTransfers)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	if c.Metrics != nil {
		mux.Handle("GET /metrics", c.Metrics)
	}
	create := http.Handler(http.HandlerFunc(s.createTransfer))
	if c.Guard != nil {
		m, err := idemhttp.New(c.Guard, &idemhttp.Config{
			Scope:          principalScope,
			JSONBodies:     true, // decode ignores Content-Type, so the fingerprint does too
			MaxRequestBody: maxBody,
			Logger:         c.Logger,
			Observer:       c.Observer,
		})
		if err != nil {
			return nil, err
		}
		create = m.Handler(create)
	}
	// Request validation runs before the idempotency layer: a malformed
	// request is refused (400, 413) and never recorded, so the client's
	// corrected retry with the same key runs.
	mux.Handle("POST /transfers", validateTransfer(create))
	s.handler = authenticate(mux)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Account is an account's JSON form.
type Account struct {
	ID      string `json:"id"`
	Balance int64  `json:"balance"`
}

// Transfer is a transfer's JSON form.
type Transfer struct {
	ID        int64  `json:"id"`
	From      string `json:"from"`
	To        string `json:"to"`
	Amount    int64  `json:"amount"`
	CreatedAt string `json:"created_at"`
}

// TransferList is the JSON form of GET /transfers.
type TransferList struct {
	Transfers []Transfer `json:"transfers"`
	Count     int        `json:"count"`
}

func (s *Service) putAccount(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Balance *int64 `json:"balance"`
	}
	if !decode(w, r, &in) {
		return
	}
	id := r.PathValue("id")
	if in.Balance == nil || *in.Balance < 0 {
		problem(w, http.StatusUnprocessableEntity, "invalid-balance", "Invalid balance", "balance must be a non-negative integer number of cents")
		return
	}
	_, err := s.db.pool.exec(r.Context(),
		`INSERT INTO accounts (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET balance = excluded.balance`,
		id, *in.Balance)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Account{ID: id, Balance: *in.Balance})
}

func (s *Service) getAccount(w http.ResponseWriter, r *http.Request) {
	a := Account{ID: r.PathValue("id")}
	err := s.db.pool.queryRow(r.Context(), `SELECT balance FROM accounts WHERE id = $1`, a.ID).Scan(&a.Balance)
	if errors.Is(err, errNoRows) {
		problem(w, http.StatusNotFound, "account-not-found", "Account not found", fmt.Sprintf("no account %q", a.ID))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Service) listTransfers(w http.ResponseWriter, r *http.Request) {
	q := `SELECT id, src, dst, amount, created_at FROM transfers ORDER BY id`
	var args []any
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			problem(w, http.StatusBadRequest, "invalid-limit", "Invalid limit", "limit must be a non-negative integer")
			return
		}
		q += ` LIMIT $1`
		args = append(args, n)
	}
	rs, err := s.db.pool.query(r.Context(), q, args...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rs.Close()
	out := TransferList{Transfers: []Transfer{}}
	for rs.Next() {
		var t Transfer
		var created int64
		if err := rs.Scan(&t.ID, &t.From, &t.To, &t.Amount, &created); err != nil {
			s.fail(w, r, err)
			return
		}
		t.CreatedAt = time.Unix(0, created).UTC().Format(time.RFC3339Nano)
		out.Transfers = append(out.Transfers, t)
	}
	if err := rs.Err(); err != nil {
		s.fail(w, r, err)
		return
	}
	out.Count = len(out.Transfers)
	writeJSON(w, http.StatusOK, out)
}

// declined is a final business answer (422): recorded and replayed.
type declined struct{ kind, title, detail string }

// transferRequest is the body of POST /transfers.
type transferRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// maxBody is the largest request body the service reads.
const maxBody = 1 << 20

// validateTransfer refuses a POST /transfers whose body is too large (413)
// or is not a transfer in JSON (400), before the idempotency layer, and
// hands the body on unchanged otherwise.
func validateTransfer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tooLarge := func() {
			problem(w, http.StatusRequestEntityTooLarge, "request-too-large", "Request too large", fmt.Sprintf("the body must not exceed %d bytes", maxBody))
			// Read the rest (boundedly) so that a client still sending
			// reads the 413 instead of a connection reset.
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.CopyN(io.Discard, r.Body, 64<<20)
		}
		if r.ContentLength > maxBody {
			tooLarge()
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			problem(w, http.StatusBadRequest, "unreadable-body", "Unreadable body", err.Error())
			return
		}
		if len(body) > maxBody {
			tooLarge()
			return
		}
		var in transferRequest
		if err := decodeBytes(body, &in); err != nil {
			problem(w, http.StatusBadRequest, "malformed-json", "Malformed JSON", err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

func (s *Service) createTransfer(w http.ResponseWriter, r *http.Request) {
	var in transferRequest
	if !decode(w, r, &in) {
		return
	}
	ctx := r.Context()
	var (
		t     Transfer
		no    *declined
		err   error
		own   txn
		q, ok = s.db.current(ctx)
	)
	if s.cfg.Guard == nil {
		// Without idem: a transaction of our own, the same statements.
		if own, err = s.db.begin(ctx); err != nil {
			s.fail(w, r, err)
			return
		}
		defer own.rollback(context.WithoutCancel(ctx))
		q = own
	} else if !ok {
		s.fail(w, r, errors.New("no idempotency transaction in the request context"))
		return
	}
	t, no, err = s.transfer(ctx, q, in.From, in.To, in.Amount)
	if err == nil && no == nil && own != nil {
		err = own.commit(ctx)
	}
	switch {
	case err != nil:
		s.fail(w, r, err) // 5xx: the idempotency layer rolls back and records nothing
	case no != nil:
		problem(w, http.StatusUnprocessableEntity, no.kind, no.title, no.detail)
	default:
		w.Header().Set("Location", "/transfers/"+strconv.FormatInt(t.ID, 10))
		writeJSON(w, http.StatusCreated, t)
	}
}

// transfer applies one transfer through q: a debit that cannot overdraw, a
// credit and the transfer row.
func (s *Service) transfer(ctx context.Context, q querier, from, to string, amount int64) (Transfer, *declined, error) {
	switch {
	case amount <= 0:
		return Transfer{}, &declined{"invalid-amount", "Invalid amount", "amount must be a positive integer number of cents"}, nil
	case from == to:
		return Transfer{}, &declined{"same-account", "Same account", "from and to must be different accounts"}, nil
	}
	var (
		found     int
		toBalance int64
	)
	if err := q.queryRow(ctx, s.db.lock, from, to).Scan(&found, &toBalance); err != nil {
		return Transfer{}, nil, err
	}
	if found != 2 {
		return Transfer{}, &declined{"unknown-account", "Unknown account", fmt.Sprintf("from %q or to %q is not an account", from, to)}, nil
	}
	// Checked before any write: a 4xx commits, so a refusal must come
	// before the debit.
	if toBalance > math.MaxInt64-amount {
		return Transfer{}, &declined{"balance-overflow", "Balance overflow", fmt.Sprintf("account %q cannot hold %d more cents", to, amount)}, nil
	}
	n, err := q.exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2 AND balance >= $1`, amount, from)
	if err != nil {
		return Transfer{}, nil, err
	}
	if n != 1 {
		return Transfer{}, &declined{"insufficient-funds", "Insufficient funds", fmt.Sprintf("account %q cannot pay %d", from, amount)}, nil
	}
	if _, err := q.exec(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, amount, to); err != nil {
		return Transfer{}, nil, err
	}
	now := s.cfg.Now().UTC()
	t := Transfer{From: from, To: to, Amount: amount, CreatedAt: now.Format(time.RFC3339Nano)}
	err = q.queryRow(ctx,
		`INSERT INTO transfers (src, dst, amount, created_at) VALUES ($1, $2, $3, $4) RETURNING id`,
		from, to, amount, now.UnixNano()).Scan(&t.ID)
	return t, nil, err
}

// fail answers a request whose database work failed. Its transaction was
// rolled back (and, under idem, nothing was recorded), so nothing happened
// and a retry is safe: 503 with Retry-After, which clients retry, rather
// than a 500, which they must not.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.Logger.ErrorContext(r.Context(), "transfers: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusServiceUnavailable, "unavailable", "Service unavailable", "the request was not applied; retry it (with the same Idempotency-Key)")
}

type principalKey struct{}

// authenticate is the demo's authentication: Authorization: Bearer <token>
// names the principal; no header is the anonymous principal. It runs before
// the idempotency layer, and its refusals are never recorded.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal := idemhttp.AnonymousScope
		if h := r.Header.Get("Authorization"); h != "" {
			scheme, token, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
				problem(w, http.StatusUnauthorized, "unauthorized", "Unauthorized", "use Authorization: Bearer <token>")
				return
			}
			principal = "bearer:" + strings.TrimSpace(token)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, principal)))
	})
}

func principalScope(r *http.Request) (string, error) {
	p, ok := r.Context().Value(principalKey{}).(string)
	if !ok {
		return "", errors.New("transfers: request was not authenticated")
	}
	return p, nil
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			problem(w, http.StatusRequestEntityTooLarge, "request-too-large", "Request too large", err.Error())
		} else {
			problem(w, http.StatusBadRequest, "unreadable-body", "Unreadable body", err.Error())
		}
		return false
	}
	if err := decodeBytes(body, v); err != nil {
		problem(w, http.StatusBadRequest, "malformed-json", "Malformed JSON", err.Error())
		return false
	}
	return true
}

// decodeBytes decodes exactly one JSON document into v.
func decodeBytes(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON document")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ProblemBase is the prefix of the service's problem type URIs.
const ProblemBase = "https://idemkit.dev/problems/transfers/"

func problem(w http.ResponseWriter, status int, kind, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": ProblemBase + kind, "title": title, "status": status, "detail": detail,
	})
}
