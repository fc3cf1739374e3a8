package transfers_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// The Location of a created transfer is a route that answers it.
func TestGetTransfer(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t, b, true)
			created := c.do("POST", "/transfers", "g", "alice", `{"from":"alice","to":"bob","amount":42}`)
			loc := created.header.Get("Location")
			if created.status != 201 || loc == "" {
				t.Fatalf("POST: %d Location=%q %s", created.status, loc, created.body)
			}
			got := c.do("GET", loc, "", "", "")
			if got.status != 200 || got.body != created.body {
				t.Errorf("GET %s: %d %s, want 200 %s", loc, got.status, got.body, created.body)
			}
			var tr transfers.Transfer
			if err := json.Unmarshal([]byte(got.body), &tr); err != nil || tr.From != "alice" || tr.To != "bob" || tr.Amount != 42 {
				t.Errorf("GET %s: %+v %v", loc, tr, err)
			}
			if r := c.do("GET", "/transfers/999999", "", "", ""); r.status != 404 || !strings.Contains(r.header.Get("Content-Type"), "problem+json") {
				t.Errorf("missing transfer: %d %s, want 404 problem+json", r.status, r.body)
			}
			for _, id := range []string{"abc", "0", "-1", "1.5", "99999999999999999999", strings.Repeat("9", 5000)} {
				if r := c.do("GET", "/transfers/"+id, "", "", ""); r.status != 400 || len(r.body) > 1024 {
					t.Errorf("GET /transfers/%.20s: %d, want a small 400", id, r.status)
				}
			}
		})
	}
}

// /readyz touches the database: 503 problem+json while it does not answer,
// while /healthz (liveness) stays 200.
func TestReadyz(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, url string, want int) {
		t.Helper()
		c := client{t, url}
		r := c.do("GET", "/readyz", "", "", "")
		if r.status != want {
			t.Errorf("/readyz: %d %s, want %d", r.status, r.body, want)
		}
		if want == 503 && (!strings.Contains(r.header.Get("Content-Type"), "problem+json") || r.header.Get("Retry-After") == "") {
			t.Errorf("/readyz 503: Content-Type %q Retry-After %q, want problem+json with Retry-After", r.header.Get("Content-Type"), r.header.Get("Retry-After"))
		}
		if r := c.do("GET", "/healthz", "", "", ""); r.status != 200 {
			t.Errorf("/healthz: %d, want 200 whatever the database", r.status)
		}
	}
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "bank.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := serve(t, transfers.SQLite(s))
		check(t, srv.URL, 200)
		s.Close()
		check(t, srv.URL, 503)
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		schema, dsn := pgtest.Schema(t)
		px, pxDSN := pgtest.Proxy(t, dsn)
		s, err := pgstore.Open(context.Background(), pxDSN, &pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		srv := serve(t, transfers.Postgres(s))
		check(t, srv.URL, 200)
		px.Close() // the server is gone: refused connections, broken pooled ones
		check(t, srv.URL, 503)
	})
}

func serve(t *testing.T, db *transfers.Database) *httptest.Server {
	t.Helper()
	svc, err := transfers.New(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return srv
}

// A client that asks for a large listing and does not read it holds the
// streaming query's database connection only until Config.RequestTimeout:
// with every pool connection taken by such clients, the service still
// answers others soon after.
func TestUnreadListingFreesItsConnection(t *testing.T) {
	t.Parallel()
	schema, dsn := pgtest.Schema(t)
	s, err := pgstore.Open(context.Background(), dsn+"&pool_max_conns=2", &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	svc, err := transfers.New(context.Background(), transfers.Postgres(s), &transfers.Config{RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(context.Background(), `
		INSERT INTO accounts VALUES ('a', 0), ('b', 0);
		INSERT INTO transfers (src, dst, amount, created_at) SELECT 'a', 'b', i, i FROM generate_series(1, 150000) i`); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	for range 2 { // as many as the pool has connections
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		if _, err := io.WriteString(conn, "GET /transfers HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	c := client{t, srv.URL}
	if r := c.do("GET", "/accounts/a", "", "", ""); r.status != 200 {
		t.Errorf("GET /accounts/a while two clients leave their listings unread: %d %s, want 200", r.status, r.body)
	}
}
