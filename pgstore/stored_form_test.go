package pgstore_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
)

// A scope, fingerprint or header that the database cannot store (a
// 3000-byte token overflows the primary key's index entry; invalid UTF-8
// and NUL are refused by text and jsonb) ran the work, then failed at the
// store on every retry: a 503 forever. They must run once and replay.
func TestGuardStoresAnyValue(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t, nil)
	ctx := context.Background()
	effects := pgx.Identifier{schema, "effects"}.Sanitize()
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}

	var token strings.Builder // random, so that PostgreSQL cannot compress it below the limit
	for token.Len() < 3000 {
		token.WriteString(rand.Text())
	}
	// The longest scope and key stored as they are, random so that they do
	// not compress: their index entry must fit.
	longest := token.String()[:255]
	longestKey := token.String()[255:510]
	if idem.StoredScope(longest) != longest {
		t.Fatalf("a 255-byte printable scope is not stored as it is")
	}
	tests := []struct {
		name   string
		req    idem.Request
		header map[string][]string
	}{
		{"LongestScopeAndKey", idem.Request{Scope: longest, Key: longestKey, Fingerprint: "fp"}, nil},
		{"LongScope", idem.Request{Scope: "Bearer " + token.String(), Key: "k1", Fingerprint: "fp"}, nil},
		{"InvalidUTF8Scope", idem.Request{Scope: "Bearer \xff\xfe", Key: "k2", Fingerprint: "fp"}, nil},
		{"NULScope", idem.Request{Scope: "tenant\x00", Key: "k3", Fingerprint: "fp"}, nil},
		{"InvalidUTF8Fingerprint", idem.Request{Scope: "s", Key: "k4", Fingerprint: "fp\xff\x00"}, nil},
		{"NULInHeader", idem.Request{Scope: "s", Key: "k5", Fingerprint: "fp"}, map[string][]string{"X-Note": {"a\x00b"}, "X-\x00": {"c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := func(ctx context.Context) (idem.Result, error) {
				tx, _ := pgstore.TxFrom(ctx)
				if _, err := tx.Exec(ctx, `INSERT INTO `+effects+` (name) VALUES ($1)`, tt.req.Key); err != nil {
					return idem.Result{}, err
				}
				return idem.Result{Status: 201, Header: tt.header, Body: []byte("done " + tt.req.Key)}, nil
			}
			for i := range 2 {
				res, replayed, err := g.Do(ctx, tt.req, work)
				if err != nil || res.Status != 201 || replayed != (i == 1) {
					t.Fatalf("call %d: status %d, replayed %v, err %v; want 201, replayed %v", i+1, res.Status, replayed, err, i == 1)
				}
			}
			if n := countRows(t, pool, `SELECT count(*) FROM `+effects+` WHERE name = $1`, tt.req.Key); n != 1 {
				t.Errorf("%d effects, want 1", n)
			}
			if _, err := s.Lookup(ctx, &idem.LookupParams{Scope: idem.StoredScope(tt.req.Scope), Key: tt.req.Key}); err != nil {
				t.Errorf("Lookup by StoredScope: %v", err)
			}
		})
	}
}
