package transfers

import (
	"errors"
	"fmt"
	"net/http"
)

// Account is an account's JSON form.
type Account struct {
	ID      string `json:"id"`
	Balance int64  `json:"balance"`
}

// maxAccountID is the length, in bytes, of the longest account id.
const maxAccountID = 64

// validAccountID reports whether id can name an account: 1 to maxAccountID
// ASCII letters, digits and the characters - _ . : @. Ids are checked
// before any work, so that no answer quotes an unbounded id.
func validAccountID(id string) bool {
	if id == "" || len(id) > maxAccountID {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '@':
		default:
			return false
		}
	}
	return true
}

const invalidIDDetail = "an account id is 1 to 64 ASCII letters, digits and - _ . : @"

// ValidAccountID reports whether id can name an account (see
// validAccountID), for the read models of the ledger's events.
func ValidAccountID(id string) bool { return validAccountID(id) }

// InvalidAccountID answers 400 with the ledger's invalid-account-id
// problem.
func InvalidAccountID(w http.ResponseWriter) {
	problem(w, http.StatusBadRequest, "invalid-account-id", "Invalid account id", invalidIDDetail)
}

// pathAccount returns the account id in r's path, or answers 400.
func pathAccount(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !validAccountID(id) {
		problem(w, http.StatusBadRequest, "invalid-account-id", "Invalid account id", invalidIDDetail)
		return "", false
	}
	return id, true
}

func (s *Service) putAccount(w http.ResponseWriter, r *http.Request) {
	id, ok := pathAccount(w, r)
	if !ok {
		return
	}
	var in struct {
		Balance *int64 `json:"balance"`
	}
	if !s.decode(w, r, &in) {
		return
	}
	if in.Balance == nil || *in.Balance < 0 {
		problem(w, http.StatusUnprocessableEntity, "invalid-balance", "Invalid balance", "balance must be a non-negative integer number of cents")
		return
	}
	ctx, cancel := s.work(r)
	defer cancel()
	_, err := s.db.pool.exec(ctx,
		`INSERT INTO accounts (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET balance = excluded.balance`,
		id, *in.Balance)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Account{ID: id, Balance: *in.Balance})
}

func (s *Service) getAccount(w http.ResponseWriter, r *http.Request) {
	id, ok := pathAccount(w, r)
	if !ok {
		return
	}
	ctx, cancel := s.work(r)
	defer cancel()
	a := Account{ID: id}
	err := s.db.pool.queryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, id).Scan(&a.Balance)
	if errors.Is(err, errNoRows) {
		problem(w, http.StatusNotFound, "account-not-found", "Account not found", fmt.Sprintf("no account %q", id))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}
