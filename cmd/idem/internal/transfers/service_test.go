package transfers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

type backend struct {
	name string
	open func(t *testing.T) (idem.Store, *transfers.Database)
	// leased, when set, is the store of leased mode (payouts); nil means
	// the store open returns.
	leased func(t *testing.T) idem.LeasedStore
}

func backends(t *testing.T) []backend {
	return []backend{
		{"SQLite", func(t *testing.T) (idem.Store, *transfers.Database) {
			s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "bank.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, transfers.SQLite(s)
		}, nil},
		{"Postgres", func(t *testing.T) (idem.Store, *transfers.Database) {
			s := openPostgres(t)
			return s, transfers.Postgres(s)
		}, nil},
	}
}

// openPostgres returns a pgstore whose pool works in a fresh schema.
func openPostgres(t *testing.T) *pgstore.Store {
	t.Helper()
	schema, dsn := pgtest.Schema(t)
	s, err := pgstore.Open(context.Background(), dsn, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type client struct {
	t   *testing.T
	url string
}

type response struct {
	status int
	header http.Header
	body   string
}

func (c client) do(method, path, key, token, body string) response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, string(b)}
}

func (c client) balance(id string) int64 {
	c.t.Helper()
	r := c.do("GET", "/accounts/"+id, "", "", "")
	var a transfers.Account
	if r.status != 200 || json.Unmarshal([]byte(r.body), &a) != nil {
		c.t.Fatalf("GET /accounts/%s: %d %s", id, r.status, r.body)
	}
	return a.Balance
}

func (c client) transfers() transfers.TransferList {
	c.t.Helper()
	r := c.do("GET", "/transfers", "", "", "")
	var l transfers.TransferList
	if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil {
		c.t.Fatalf("GET /transfers: %d %s", r.status, r.body)
	}
	return l
}

func setup(t *testing.T, b backend, withIdem bool) client {
	t.Helper()
	store, db := b.open(t)
	cfg := &transfers.Config{}
	if withIdem {
		g, err := idem.New(store, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Guard = g
	}
	svc, err := transfers.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	c := client{t, srv.URL}
	for id, bal := range map[string]int{"alice": 10000, "bob": 0} {
		if r := c.do("PUT", "/accounts/"+id, "", "", fmt.Sprintf(`{"balance":%d}`, bal)); r.status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, r.status, r.body)
		}
	}
	return c
}

func TestTransfers(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			t.Run("Accounts", func(t *testing.T) {
				c := setup(t, b, true)
				if got := c.balance("alice"); got != 10000 {
					t.Errorf("alice = %d, want 10000", got)
				}
				if r := c.do("GET", "/accounts/nobody", "", "", ""); r.status != 404 || !strings.Contains(r.header.Get("Content-Type"), "problem+json") {
					t.Errorf("unknown account: %d %s, want 404 problem+json", r.status, r.header.Get("Content-Type"))
				}
				if r := c.do("PUT", "/accounts/x", "", "", `{"balance":-1}`); r.status != 422 {
					t.Errorf("negative balance: %d, want 422", r.status)
				}
			})
			t.Run("RetryIsReplayedAndAppliedOnce", func(t *testing.T) {
				c := setup(t, b, true)
				body := `{"from":"alice","to":"bob","amount":2500}`
				first := c.do("POST", "/transfers", "k-1", "alice", body)
				if first.status != 201 {
					t.Fatalf("first: %d %s", first.status, first.body)
				}
				again := c.do("POST", "/transfers", "k-1", "alice", `{ "amount": 2500, "to": "bob", "from": "alice" }`)
				if again.status != 201 || again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("retry: %d %q replayed=%q; want the first answer replayed", again.status, again.body, again.header.Get("Idempotent-Replayed"))
				}
				if a, b := c.balance("alice"), c.balance("bob"); a != 7500 || b != 2500 {
					t.Errorf("balances = %d, %d; want 7500, 2500", a, b)
				}
				if n := c.transfers().Count; n != 1 {
					t.Errorf("transfers = %d, want 1", n)
				}
			})
			t.Run("CreditThatWouldOverflowIsDeclined", func(t *testing.T) {
				c := setup(t, b, true)
				c.do("PUT", "/accounts/rich", "", "", `{"balance":9223372036854775807}`)
				r := c.do("POST", "/transfers", "o", "", `{"from":"alice","to":"rich","amount":1}`)
				if r.status != 422 || !strings.Contains(r.body, "balance-overflow") {
					t.Errorf("credit past int64: %d %s, want 422 balance-overflow", r.status, r.body)
				}
				if a, rich := c.balance("alice"), c.balance("rich"); a != 10000 || rich != math.MaxInt64 {
					t.Errorf("balances = %d, %d; want both untouched", a, rich)
				}
				if n := c.transfers().Count; n != 0 {
					t.Errorf("transfers = %d, want 0", n)
				}
			})
			t.Run("Rules", func(t *testing.T) {
				c := setup(t, b, true)
				cases := []struct {
					name, key, body string
					status          int
				}{
					{"MissingKey", "", `{"from":"alice","to":"bob","amount":1}`, 400},
					{"MalformedJSON", "m", `{"from":`, 400},
					{"UnknownAccount", "u", `{"from":"alice","to":"carol","amount":1}`, 422},
					{"ZeroAmount", "z", `{"from":"alice","to":"bob","amount":0}`, 422},
					{"SameAccount", "s", `{"from":"alice","to":"alice","amount":1}`, 422},
					{"InsufficientFunds", "i", `{"from":"bob","to":"alice","amount":1}`, 422},
				}
				for _, tc := range cases {
					r := c.do("POST", "/transfers", tc.key, "", tc.body)
					if r.status != tc.status {
						t.Errorf("%s: status %d %s, want %d", tc.name, r.status, r.body, tc.status)
					}
				}
				// Validation runs before the idempotency layer: the malformed
				// request was not recorded, so its corrected retry runs.
				if r := c.do("POST", "/transfers", "m", "", `{"from":"alice","to":"bob","amount":1.5}`); r.status != 400 || r.header.Get("Idempotent-Replayed") != "" {
					t.Errorf("non-integer amount: %d replayed=%q, want an unrecorded 400", r.status, r.header.Get("Idempotent-Replayed"))
				}
				if r := c.do("POST", "/transfers", "m", "", `{"from":"alice","to":"bob","amount":1}`); r.status != 201 {
					t.Errorf("corrected retry after a 400: %d %s, want 201", r.status, r.body)
				}
				big := `{"from":"alice","to":"bob","amount":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`
				if r := c.do("POST", "/transfers", "big", "", big); r.status != 413 {
					t.Errorf("body over 1 MiB: %d, want 413", r.status)
				}
				mid := `{"from":"alice","to":"bob","amount":2,"pad":"` + strings.Repeat("x", 100<<10) + `"}`
				if r := c.do("POST", "/transfers", "mid", "", mid); r.status != 201 {
					t.Errorf("body of 100 KiB: %d %s, want 201", r.status, r.body)
				}
				// The body is JSON whatever its Content-Type: reordering it is
				// still the same request.
				req, _ := http.NewRequest("POST", c.url+"/transfers", strings.NewReader(`{"amount":1,"to":"bob","from":"alice"}`))
				req.Header.Set("Idempotency-Key", "m")
				req.Header.Set("Content-Type", "text/plain")
				if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 201 || res.Header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("reordered retry sent as text/plain: %v %v, want the replay", res.StatusCode, err)
				} else {
					res.Body.Close()
				}
				// A declined transfer is a final answer: replayed even after
				// the funds arrive.
				c.do("PUT", "/accounts/bob", "", "", `{"balance":100}`)
				r := c.do("POST", "/transfers", "i", "", `{"from":"bob","to":"alice","amount":1}`)
				if r.status != 422 || r.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("retry of a declined transfer: %d replayed=%q, want the 422 replayed", r.status, r.header.Get("Idempotent-Replayed"))
				}
				if r := c.do("POST", "/transfers", "i", "", `{"from":"bob","to":"alice","amount":2}`); r.status != 422 || r.header.Get("Idempotent-Replayed") != "" {
					t.Errorf("same key, other body: %d, want 422 mismatch (not a replay)", r.status)
				}
				if n := c.transfers().Count; n != 2 {
					t.Errorf("transfers = %d, want 2 (the corrected one and the 100 KiB one)", n)
				}
			})
			t.Run("KeysAreScopedPerPrincipal", func(t *testing.T) {
				c := setup(t, b, true)
				body := `{"from":"alice","to":"bob","amount":100}`
				if r := c.do("POST", "/transfers", "shared", "alice-token", body); r.status != 201 {
					t.Fatalf("alice: %d %s", r.status, r.body)
				}
				r := c.do("POST", "/transfers", "shared", "mallory-token", body)
				if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
					t.Errorf("another principal with the same key: %d replayed=%q, want its own execution", r.status, r.header.Get("Idempotent-Replayed"))
				}
				if r := c.do("POST", "/transfers", "shared", "", `{"from":"alice","to":"bob","amount":7}`); r.status != 201 {
					t.Errorf("anonymous with the same key and another body: %d, want its own execution", r.status)
				}
				if r := c.do("POST", "/transfers", "x", "", body); r.status != 201 {
					t.Errorf("anonymous: %d", r.status)
				}
				req, _ := http.NewRequest("POST", c.url+"/transfers", strings.NewReader(body))
				req.Header.Set("Authorization", "Basic Zm9vOmJhcg==")
				req.Header.Set("Idempotency-Key", "y")
				if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 401 {
					t.Errorf("non-bearer credentials: %v %v, want 401", res.StatusCode, err)
				} else {
					res.Body.Close()
				}
			})
			t.Run("WithoutIdemRetriesDuplicate", func(t *testing.T) {
				c := setup(t, b, false)
				body := `{"from":"alice","to":"bob","amount":100}`
				for range 2 {
					if r := c.do("POST", "/transfers", "k", "", body); r.status != 201 {
						t.Fatalf("%d %s", r.status, r.body)
					}
				}
				if n := c.transfers().Count; n != 2 {
					t.Errorf("transfers without idem = %d, want 2 (the key is ignored)", n)
				}
			})
			t.Run("ConcurrentTransfersConserveMoney", func(t *testing.T) {
				c := setup(t, b, true)
				ids := []string{"alice", "bob", "carol", "dave"}
				for _, id := range ids {
					c.do("PUT", "/accounts/"+id, "", "", `{"balance":1000}`)
				}
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(w), 1))
						for i := range 15 {
							from, to := ids[rng.IntN(4)], ids[rng.IntN(4)]
							body := fmt.Sprintf(`{"from":%q,"to":%q,"amount":%d}`, from, to, 1+rng.IntN(400))
							key := fmt.Sprintf("w%d-%d", w, i)
							for attempt := 0; attempt < 100; attempt++ {
								r := c.do("POST", "/transfers", key, "", body)
								if r.status != 409 && r.status != 503 {
									break
								}
								time.Sleep(10 * time.Millisecond)
							}
						}
					})
				}
				wg.Wait()
				var sum int64
				for _, id := range ids {
					bal := c.balance(id)
					if bal < 0 {
						t.Errorf("%s balance %d < 0", id, bal)
					}
					sum += bal
				}
				if sum != 4000 {
					t.Errorf("sum of balances = %d, want 4000 (money conserved)", sum)
				}
			})
		})
	}
}

// E8 (docs/DESIGN.md): a database failure inside the transfer is a 503 with Retry-After (the
// transaction was rolled back and nothing recorded), never a 500, which
// clients must not retry.
func TestDatabaseFailureIsRetriable(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "bank.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, _ := idem.New(s, nil)
	svc, err := transfers.New(context.Background(), transfers.SQLite(s), &transfers.Config{Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	c := client{t, srv.URL}
	c.do("PUT", "/accounts/alice", "", "", `{"balance":100}`)
	c.do("PUT", "/accounts/bob", "", "", `{"balance":0}`)
	if _, err := s.DB().Exec(`ALTER TABLE transfers RENAME TO transfers_gone`); err != nil {
		t.Fatal(err)
	}
	r := c.do("POST", "/transfers", "k", "", `{"from":"alice","to":"bob","amount":10}`)
	if r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Fatalf("database failure: %d Retry-After=%q, want 503 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
	if got := c.balance("alice"); got != 100 {
		t.Errorf("alice = %d after a failed transfer, want 100 (rolled back)", got)
	}
	if _, err := s.DB().Exec(`ALTER TABLE transfers_gone RENAME TO transfers`); err != nil {
		t.Fatal(err)
	}
	if r := c.do("POST", "/transfers", "k", "", `{"from":"alice","to":"bob","amount":10}`); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("retry after the failure: %d replayed=%q, want a fresh 201", r.status, r.header.Get("Idempotent-Replayed"))
	}
}
