package projection_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idem/cmd/idem/internal/projection"
	"github.com/idemkit/idem/sqlitestore"
)

// GET /accounts/{id} answers an id the ledger would refuse with the
// ledger's 400, and an account no event named with 404.
func TestAccountIDIsCheckedAsTheLedgerChecksIt(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "projection.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := projection.SQLite(s)
	if err := p.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler(nil))
	defer srv.Close()
	for path, want := range map[string]int{
		"/accounts/a%2Fb":                        400,
		"/accounts/%20":                          400,
		"/accounts/" + strings.Repeat("x", 5000): 400,
		"/accounts/%C3%BC":                       400,
		"/accounts/nobody":                       404,
	} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var prob struct{ Type string }
		_ = json.NewDecoder(res.Body).Decode(&prob)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %.40s: %d, want %d", path, res.StatusCode, want)
		}
		if want == 400 && !strings.HasSuffix(prob.Type, "/invalid-account-id") {
			t.Errorf("GET %.40s: problem type %q, want invalid-account-id", path, prob.Type)
		}
	}
}
