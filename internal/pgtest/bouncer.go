package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem/internal/servertest"
)

// BouncerEnv, when set to "transaction" or "session", makes Schema return
// a DSN through a private PgBouncer in that pool mode (see BouncerSchema),
// so that every test of a fresh schema runs through the bouncer.
const BouncerEnv = "IDEM_PG_BOUNCER"

// BouncerModes are PgBouncer's pool modes the bouncer tests run in.
var BouncerModes = []string{"transaction", "session"}

// BouncerSchema starts a private PgBouncer (the pgbouncer binary on PATH
// or in /usr/sbin) in pool mode mode, in front of the server of DSN(), on
// a free loopback port, stopped at t's clean-up. It creates a fresh
// schema as Schema does and returns its name and a URL, as a user would
// write it, that reaches the server through the bouncer with that schema
// as search_path.
//
// PgBouncer 1.18 refuses a search_path startup parameter, so the schema
// is the bouncer's: the URL names a bouncer database of the schema's name
// whose server connections set it (connect_query). In session mode the
// bouncer resets a server connection between two clients with
// DEALLOCATE ALL rather than the default DISCARD ALL, which would also
// reset the search_path; what DISCARD ALL does to the store's prepared
// statements, DEALLOCATE ALL does too.
//
// When pgbouncer is missing, the test is skipped, or fails under CI=true.
func BouncerSchema(t testing.TB, mode string) (schema, dsn string) {
	t.Helper()
	schema = createSchema(t)
	return schema, startBouncer(t, mode, schema)
}

func bouncerBinary() string {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer"
	}
	return ""
}

func startBouncer(t testing.TB, mode, schema string) string {
	t.Helper()
	if mode != "transaction" && mode != "session" {
		t.Fatalf("pgtest: pool mode %q: want transaction or session", mode)
	}
	bin := bouncerBinary()
	if bin == "" {
		servertest.Missing(t, "pgbouncer (.ci/pgbouncer installs it)", exec.ErrNotFound)
	}
	cfg, err := pgconn.ParseConfig(DSN())
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	// pgbouncer refuses to run as root: it then switches to nobody, who
	// must read the configuration.
	dir, err := os.MkdirTemp("", "idem-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("host=%s port=%d dbname=%s", cfg.Host, cfg.Port, cfg.Database)
	reset := "DISCARD ALL"
	if mode == "session" {
		reset = "DEALLOCATE ALL"
	}
	ini := fmt.Sprintf(`[databases]
%s = %s
%s = %s connect_query='SET search_path TO %s'
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
server_reset_query = %s
max_client_conn = 400
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
`, cfg.Database, server, schema, server, pgx.Identifier{schema}.Sanitize(), port,
		filepath.Join(dir, "users.txt"), mode, reset)
	users := fmt.Sprintf("%q \"\"\n", cfg.User)
	for name, text := range map[string]string{"pgbouncer.ini": ini, "users.txt": users} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "nobody"}, args...)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // immediate shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/" + schema, RawQuery: "sslmode=disable"}
	dsn := u.String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgconn.Connect(ctx, dsn)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return dsn
		}
		select {
		case <-exited:
			t.Fatalf("pgtest: pgbouncer exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: pgbouncer on port %d: %v\n%s", port, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
