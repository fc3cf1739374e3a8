package transfers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/sqlitestore"
)

// importer runs rows through batch.Run and ImportTransfer as idem import
// does, on a service whose HTTP side is served too.
type importer struct {
	client
	svc   *transfers.Service
	guard *idem.Guard
}

func importSetup(t *testing.T, store idem.Store, db *transfers.Database, ttl time.Duration) importer {
	t.Helper()
	g, err := idem.New(store, &idem.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := transfers.New(context.Background(), db, &transfers.Config{Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	im := importer{client: client{t, srv.URL}, svc: svc, guard: g}
	for id, bal := range map[string]int{"alice": 1000, "bob": 0} {
		if r := im.do("PUT", "/accounts/"+id, "", "", fmt.Sprintf(`{"balance":%d}`, bal)); r.status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, r.status, r.body)
		}
	}
	return im
}

func (im importer) run(batchID, csv string) *batch.Report {
	im.t.Helper()
	rows, bad, err := transfers.ParseImport(strings.NewReader(csv))
	if err != nil || len(bad) > 0 {
		im.t.Fatalf("ParseImport: %v %v", bad, err)
	}
	items := make([]batch.Item[transfers.ImportRow], len(rows))
	for i, r := range rows {
		items[i] = batch.Item[transfers.ImportRow]{ID: r.ID, Body: fmt.Appendf(nil, "%s,%s,%d", r.From, r.To, r.Amount), Value: r}
	}
	rep, err := batch.Run(context.Background(), im.guard, &batch.Config{BatchID: batchID, Scope: transfers.ImportScope}, items,
		func(ctx context.Context, it batch.Item[transfers.ImportRow]) (idem.Result, error) {
			t, err := im.svc.ImportTransfer(ctx, batchID, it.Value)
			if err != nil {
				return idem.Result{}, err
			}
			body, _ := json.Marshal(t)
			return idem.Result{Status: 201, Body: body}, nil
		})
	if err != nil {
		im.t.Fatal(err)
	}
	return rep
}

func (im importer) rawTransfers() []map[string]any {
	im.t.Helper()
	r := im.do("GET", "/transfers", "", "", "")
	var l struct{ Transfers []map[string]any }
	if err := json.Unmarshal([]byte(r.body), &l); err != nil {
		im.t.Fatalf("GET /transfers: %v %s", err, r.body)
	}
	return l.Transfers
}

const importCSV = `id,from,to,amount
r1,alice,bob,100
r2,alice,carol,5
r3,alice,bob,2000
r4,bob,alice,30
`

// Imported rows become transfers with their batch and row, refusals are
// recorded and replayed, and a transfer made over HTTP answers exactly as
// before (no batch_id, no row_id).
func TestImportTransfers(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, db := b.open(t)
			im := importSetup(t, store, db, 0)
			if r := im.do("POST", "/transfers", "k1", "", `{"from":"alice","to":"bob","amount":1}`); r.status != 201 {
				t.Fatalf("POST /transfers: %d %s", r.status, r.body)
			}
			rep := im.run("b-1", importCSV)
			if got, want := rep.Counts, (batch.Counts{Applied: 2, Refused: 2}); got != want {
				t.Fatalf("counts %+v, want %+v: %+v", got, want, rep.Items)
			}
			for i, want := range map[int]string{1: "unknown-account", 2: "insufficient-funds"} {
				if ir := rep.Items[i]; ir.Outcome != batch.Refused || !strings.HasPrefix(ir.Reason, want+":") {
					t.Errorf("row %s: %+v, want refused %s", ir.ID, ir, want)
				}
			}
			if a, bb := im.balance("alice"), im.balance("bob"); a != 1000-1-100+30 || bb != 1+100-30 {
				t.Errorf("balances alice %d, bob %d after the import", a, bb)
			}
			list := im.rawTransfers()
			if len(list) != 3 {
				t.Fatalf("transfers: %v, want 3", list)
			}
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range list[0] {
					if !yield(k) {
						return
					}
				}
			})
			if want := []string{"amount", "created_at", "from", "id", "to"}; !reflect.DeepEqual(keys, want) {
				t.Errorf("the HTTP transfer's members: %v, want %v", keys, want)
			}
			if list[1]["batch_id"] != "b-1" || list[1]["row_id"] != "r1" || list[2]["row_id"] != "r4" {
				t.Errorf("imported transfers: %v, want batch_id b-1 and row_id r1, r4", list[1:])
			}
			if r := im.do("GET", fmt.Sprintf("/transfers/%v", list[1]["id"]), "", "", ""); !strings.Contains(r.body, `"batch_id":"b-1","row_id":"r1"`) {
				t.Errorf("GET /transfers/{id} of an imported transfer: %s", r.body)
			}
			// Once the funds are there, the re-run still replays the
			// refusal: it was a final answer.
			im.do("PUT", "/accounts/alice", "", "", `{"balance":100000}`)
			rep = im.run("b-1", importCSV)
			if got, want := rep.Counts, (batch.Counts{Replayed: 2, Refused: 2}); got != want || !rep.Items[2].Replayed {
				t.Fatalf("re-run: counts %+v, want %+v", got, want)
			}
			if n := len(im.rawTransfers()); n != 3 {
				t.Errorf("%d transfers after the re-run, want 3", n)
			}
		})
	}
}

// An import key is in its own scope: a client sending the same string as
// its Idempotency-Key (anonymous, or as the principal "import") gets a
// transfer of its own, not the row's answer.
func TestImportKeysAreNotHTTPKeys(t *testing.T) {
	t.Parallel()
	store, db := backends(t)[0].open(t)
	im := importSetup(t, store, db, 0)
	im.run("b", "id,from,to,amount\nr1,alice,bob,100\n")
	key := batch.Key("b", "r1")
	for _, token := range []string{"", "import"} {
		r := im.do("POST", "/transfers", key, token, `{"from":"alice","to":"bob","amount":100}`)
		if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
			t.Errorf("POST with the row's key (token %q): %d replayed=%q, want a new transfer", token, r.status, r.header.Get("Idempotent-Replayed"))
		}
	}
	if n := len(im.rawTransfers()); n != 3 {
		t.Errorf("%d transfers, want 3 (1 imported, 2 over HTTP)", n)
	}
}

// The ledger's backstop: when a row's record has expired (and been swept),
// a re-run finds the transfer by its batch and row and refuses the row
// instead of applying it again; (batch_id, row_id) is unique besides.
func TestImportAfterRecordsExpiredAppliesNothingTwice(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, db := b.open(t)
			im := importSetup(t, store, db, time.Millisecond)
			csv := "id,from,to,amount\nr1,alice,bob,100\nr2,alice,bob,200\n"
			if rep := im.run("b", csv); rep.Applied != 2 {
				t.Fatalf("first run: %+v", rep.Items)
			}
			time.Sleep(5 * time.Millisecond)
			rep := im.run("b", csv)
			if rep.Refused != 2 {
				t.Fatalf("re-run after expiry: %+v, want both refused", rep.Items)
			}
			for _, ir := range rep.Items {
				if !strings.HasPrefix(ir.Reason, "already-applied:") {
					t.Errorf("row %s: %q, want already-applied", ir.ID, ir.Reason)
				}
			}
			if n, a := len(im.rawTransfers()), im.balance("alice"); n != 2 || a != 700 {
				t.Errorf("%d transfers, alice %d; want 2 and 700", n, a)
			}
		})
	}
}

// A ledger created before imports gains batch_id, row_id and their unique
// index when the service starts (twice: a restart leaves them).
func TestExistingLedgerGainsImportColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "old.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_, err = s.DB().Exec(`CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));
CREATE TABLE transfers (id INTEGER PRIMARY KEY AUTOINCREMENT, src TEXT NOT NULL REFERENCES accounts (id),
	dst TEXT NOT NULL REFERENCES accounts (id), amount INTEGER NOT NULL CHECK (amount > 0), created_at INTEGER NOT NULL, message_id TEXT);
INSERT INTO accounts (id, balance) VALUES ('alice', 10000), ('bob', 0);
INSERT INTO transfers (src, dst, amount, created_at) VALUES ('alice', 'bob', 5, 1)`)
	if err != nil {
		t.Fatal(err)
	}
	db := transfers.SQLite(s)
	for range 2 {
		if _, err := transfers.New(ctx, db, nil); err != nil {
			t.Fatalf("New on an existing ledger: %v", err)
		}
	}
	im := importSetup(t, s, db, 0)
	im.run("b", "id,from,to,amount\nr1,alice,bob,7\n")
	list := im.rawTransfers()
	if len(list) != 2 || list[0]["batch_id"] != nil || list[1]["batch_id"] != "b" {
		t.Errorf("transfers = %v, want the old one without batch_id and the imported one", list)
	}
	_, err = s.DB().Exec(`INSERT INTO transfers (src, dst, amount, created_at, batch_id, row_id) VALUES ('alice', 'bob', 1, 2, 'b', 'r1')`)
	if err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Errorf("a second transfer for (b, r1): %v, want a unique violation", err)
	}
}

func TestImportTransferNeedsTheBatchTransaction(t *testing.T) {
	t.Parallel()
	store, db := backends(t)[0].open(t)
	im := importSetup(t, store, db, 0)
	_, err := im.svc.ImportTransfer(context.Background(), "b", transfers.ImportRow{ID: "r", From: "alice", To: "bob", Amount: 1})
	if err == nil || errors.Is(err, batch.ErrRefused) {
		t.Errorf("ImportTransfer outside batch.Run: %v, want an error", err)
	}
}
