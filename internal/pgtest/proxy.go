package pgtest

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem/internal/faultproxy"
)

// Proxy starts a fault proxy in front of the server that dsn names,
// closed at t's clean-up, and returns it with dsn changed to connect
// through it. A client that takes a dial function can use the proxy's
// Dial instead, with any DSN of that server. When dsn names no TCP host
// (a Unix socket, say), the test is skipped: there is nothing to proxy.
func Proxy(t testing.TB, dsn string) (*faultproxy.Proxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host == "" || strings.HasPrefix(cfg.Host, "/") {
		t.Skipf("the DSN has no TCP host to proxy (host %q)", cfg.Host)
	}
	p := faultproxy.New(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	host, port, err := net.SplitHostPort(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	through, err := withSettings(dsn, "host", host, "port", port)
	if err != nil {
		t.Fatal(err)
	}
	return p, through
}
