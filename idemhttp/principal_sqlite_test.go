package idemhttp_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/sqlitestore"
)

// K2 on the embedded default store, through a real server: an
// authentication middleware hands the principal over; a retry with a
// refreshed token is a replay, another principal's request with the same
// key runs on its own, and a request without a principal is refused
// before anything is written.
func TestPrincipalScopeSQLite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, g := sqliteGuard(t, `CREATE TABLE orders (id INTEGER PRIMARY KEY, owner TEXT NOT NULL)`)
	mw, err := idemhttp.New(g, &idemhttp.Config{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	orders := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := sqlitestore.TxFrom(r.Context())
		if !ok {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		owner, _ := idem.PrincipalFrom(r.Context())
		res, err := tx.ExecContext(r.Context(), `INSERT INTO orders (owner) VALUES (?)`, owner)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		id, _ := res.LastInsertId()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, id)
	}))
	tokens := map[string]string{"Bearer a1": "user:ann", "Bearer a2": "user:ann", "Bearer b1": "user:bob"}
	srv := httptest.NewServer(tokenAuth("Authorization", tokens, orders))
	defer srv.Close()

	post := func(token string) (status int, replayed, body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{"sku":"A1"}`))
		req.Header.Set("Idempotency-Key", "order-1001")
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(idemhttp.ReplayedHeader), string(b)
	}
	count := func() (n int) {
		t.Helper()
		if err := store.DB().QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if status, _, body := post(""); status != http.StatusInternalServerError || !strings.Contains(body, idemhttp.ProblemNoPrincipal) {
		t.Errorf("without a principal: got %d %s, want 500 no-principal", status, body)
	}
	if got := count(); got != 0 {
		t.Errorf("orders after the refusal: got %d, want 0", got)
	}
	_, _, ann := post("Bearer a1")
	status, replayed, again := post("Bearer a2")
	if status != http.StatusCreated || replayed != "true" || again != ann {
		t.Errorf("retry with the refreshed token: got %d replayed=%q %s, want 201 replayed=true %s", status, replayed, again, ann)
	}
	status, replayed, bob := post("Bearer b1")
	if status != http.StatusCreated || replayed != "" || bob == ann {
		t.Errorf("bob with ann's key: got %d replayed=%q %s, want his own 201", status, replayed, bob)
	}
	if got, want := count(), 2; got != want {
		t.Errorf("orders: got %d, want %d (one per principal)", got, want)
	}
	for _, scope := range []string{"user:ann", "user:bob"} {
		if _, err := store.Lookup(ctx, &idem.LookupParams{Scope: scope, Key: "order-1001"}); err != nil {
			t.Errorf("record in scope %s: %v", scope, err)
		}
	}
	if _, err := store.Lookup(ctx, &idem.LookupParams{Scope: idem.AnonymousScope, Key: "order-1001"}); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("record in %q: got %v, want none", idem.AnonymousScope, err)
	}
}

// The first answer carries a recorded header exactly as its replays will.
// SQLite keeps header values as text: a value that is not valid UTF-8 is
// recorded with U+FFFD for the bad bytes, and the first client gets that
// same value, not bytes its retries would never see again.
func TestFirstAnswerHeadersAreTheRecordedOnes(t *testing.T) {
	t.Parallel()
	store, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(g, &idemhttp.Config{Logger: discardLogger(), RecordHeaders: append(idemhttp.DefaultRecordHeaders(), "X-V")})
	if err != nil {
		t.Fatal(err)
	}
	handler := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-V"] = []string{"caf\xe9"}
		w.WriteHeader(http.StatusCreated)
	}))
	first := serve(handler, "POST", "/orders", `{"n":1}`, withKey("k"))
	replay := serve(handler, "POST", "/orders", `{"n":1}`, withKey("k"))
	if replay.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("second answer is not a replay")
	}
	if got, want := first.Header().Values("X-V"), replay.Header().Values("X-V"); !slices.Equal(got, want) {
		t.Errorf("X-V: first answer %q, replay %q; want the same bytes", got, want)
	}
}
