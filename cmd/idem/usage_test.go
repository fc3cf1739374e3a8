package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseCommandLine parses args, a command and its command line, into the
// command's options, as Main.Run and the command's Run do, without
// validating or running them.
func parseCommandLine(t *testing.T, args []string) (commandOptions, error) {
	t.Helper()
	m := &Main{Stdout: io.Discard, Stderr: io.Discard}
	name, rest := args[0], args[1:]
	var (
		o        commandOptions
		synopsis string
		sx       = flagsFirst
	)
	switch name {
	case "serve":
		o, synopsis = new(serveOptions), serveSynopsis
	case "complete":
		o, synopsis = new(completeOptions), completeSynopsis
	case "sweep":
		o, synopsis = new(sweepOptions), sweepSynopsis
	case "inspect":
		o, synopsis = new(inspectOptions), inspectSynopsis
	case "demo":
		o, synopsis = new(demoOptions), demoSynopsis
	case "bench":
		o, synopsis = new(benchOptions), benchSynopsis
	case "import":
		o, synopsis, sx = new(importOptions), importSynopsis, flagsAnywhere
	case "check":
		o, synopsis, sx = new(checkOptions), checkSynopsis, flagsAnywhere
	case "relay":
		o, synopsis = new(relayOptions), relaySynopsis
	case "project":
		o, synopsis = new(projectOptions), projectSynopsis
	case "outbox":
		o, synopsis, sx = new(outboxOptions), outboxSynopsis, flagsAnywhere
	default:
		t.Fatalf("no command %q", name)
	}
	return o, m.parseOptions(name, synopsis, sx, rest, o)
}

// Every usage error of every command, found by parsing and validating the
// command line: nothing is opened, started or connected to. Each is a
// usageError (exit status 2) and says what is wrong in the words that
// callers match.
func TestUsageErrorTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "idem.db")
	csv := filepath.Join(dir, "rows.csv")
	plan := filepath.Join(dir, "plan.yaml")
	typo := filepath.Join(dir, "typo.json")
	for name, text := range map[string]string{
		csv:  "id,from,to,amount\nr1,a0,a1,5\n",
		plan: "endpoints: []\n",
		typo: `{"endpoints":[{"url":"http://x/","bdy":"{}"}]}`,
	} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const (
		rdb  = "redis://127.0.0.1:6379/0"
		pg   = "postgres://u@127.0.0.1:1/db"
		prov = "http://127.0.0.1:1"
		u    = "http://127.0.0.1:1/x"
	)
	for _, tt := range []struct {
		args []string
		want string
	}{
		// serve
		{[]string{"serve", "extra"}, `serve: unexpected argument "extra" (run "idem serve -h")`},
		{[]string{"serve", "-no-such-flag"}, "serve: flag provided but not defined: -no-such-flag"},
		{[]string{"serve", "-ttl", "0s"}, "serve: -ttl must be positive, got 0s"},
		{[]string{"serve", "-body-timeout", "0s"}, "serve: -body-timeout must be positive"},
		{[]string{"serve", "-request-timeout", "-1s"}, "serve: -request-timeout must be positive"},
		{[]string{"serve", "-idle-timeout", "-1s"}, "serve: -idle-timeout must be positive, got -1s"},
		{[]string{"serve", "-grace", "0s"}, "serve: -grace must be positive"},
		{[]string{"serve", "-consume-ttl", "0s"}, "serve: -consume-ttl must be positive"},
		{[]string{"serve", "-db", rdb}, "serve: -db redis://127.0.0.1:6379/0: Redis keeps leased-mode records only, those of the payouts, and there are no payouts without -provider"},
		{[]string{"serve", "-db", "redis://user:secret@127.0.0.1:6379/0"}, "redis://user:xxxxx@127.0.0.1:6379/0"},
		{[]string{"serve", "-db", file, "-ledger", file}, "serve: -ledger applies only with a redis:// -db"},
		{[]string{"serve", "-db", rdb, "-ledger", rdb, "-provider", prov}, "serve: -ledger must be a SQL database"},
		{[]string{"serve", "-db", rdb + "?prefix=", "-provider", prov}, "serve: -db redis://127.0.0.1:6379/0?prefix=: ?prefix= is empty"},
		{[]string{"serve", "-db", rdb + "?prefix=a{b}", "-provider", prov}, "?prefix= must not contain '{' or '}'"},
		{[]string{"serve", "-db", pg, "-pool", "0"}, "serve: -pool must be positive, got 0"},
		{[]string{"serve", "-max-concurrent", "0"}, "serve: -max-concurrent must be positive, got 0"},
		{[]string{"serve", "-pool", "4"}, "serve: -pool applies to PostgreSQL and MySQL only"},
		{[]string{"serve", "-replay-probe"}, "serve: -replay-probe applies to PostgreSQL and MySQL only"},
		{[]string{"serve", "-idempotency", "maybe"}, `serve: -idempotency must be "on" or "off", got "maybe"`},
		{[]string{"serve", "-replay-cache", "32MB"}, `serve: -replay-cache must be a size in bytes with an optional KiB, MiB or GiB suffix (such as 32MiB), or 0 to turn the cache off, got "32MB"`},
		{[]string{"serve", "-replay-cache", "-1"}, `serve: -replay-cache must be a size in bytes`},
		{[]string{"serve", "-replay-cache", "99999999999GiB"}, `serve: -replay-cache is too large, got "99999999999GiB"`},
		{[]string{"serve", "-replay-cache", "0", "-idempotency", "off"}, "serve: -replay-cache applies only with -idempotency on"},
		{[]string{"serve", "-consume-queue", "q"}, "serve: -consume-queue and -consume-ttl apply only with -consume"},
		{[]string{"serve", "-consume-ttl", "1h"}, "apply only with -consume"},
		{[]string{"serve", "-consume", "nats://127.0.0.1:4222", "-consume-queue", "a.b"}, `serve: -consume-queue must be 1 to 64 ASCII letters, digits, - and _, got "a.b"`},
		{[]string{"serve", "-consume", "nats://127.0.0.1:4222", "-idempotency", "off"}, "serve: -consume needs -idempotency on"},
		{[]string{"serve", "-consume", "127.0.0.1:4222"}, "serve: -consume must be a broker URL such as nats://127.0.0.1:4222 or amqp://guest:guest@127.0.0.1:5672/, got \"(unparsable URL)\" (supported schemes: amqp, amqps"},
		{[]string{"serve", "-consume", "kafka://u:hunter2@h:1"}, `serve: -consume: unknown scheme "kafka" (supported schemes: amqp, amqps`},
		{[]string{"serve", "-lease", "2s"}, "serve: -lease applies only with -provider"},
		{[]string{"serve", "-provider-timeout", "2s"}, "serve: -provider-timeout applies only with -provider"},
		{[]string{"serve", "-complete-interval", "2s"}, "serve: -complete-interval applies only with -provider"},
		{[]string{"serve", "-report-after", "2s"}, "serve: -report-after applies only with -provider"},
		{[]string{"serve", "-orphan-after", "2s"}, "serve: -orphan-after applies only with -provider"},
		{[]string{"serve", "-provider", prov, "-orphan-after", "0s"}, "serve: -orphan-after must be positive, got 0s"},
		{[]string{"serve", "-provider", prov, "-idempotency", "off"}, "serve: -provider needs -idempotency on"},
		{[]string{"serve", "-provider", prov, "-lease", "0s"}, "serve: -lease must be positive, got 0s"},
		{[]string{"serve", "-provider", prov, "-lease", "500ms"}, "serve: -lease must be at least 1s, got 500ms"},
		{[]string{"serve", "-provider", prov, "-report-after", "0s"}, "serve: -report-after must be positive"},
		{[]string{"serve", "-provider", "ftp://x"}, `serve: -provider must be an http:// or https:// URL, got "ftp://x"`},
		{[]string{"serve", "-provider", prov, "-complete-interval", "0s"}, "serve: -complete-interval must be positive, got 0s"},
		{[]string{"serve", "-otlp", "127.0.0.1:4318"}, `serve: -otlp must be an http:// or https:// URL, got "127.0.0.1:4318"`},
		{[]string{"serve", "-log-level", "verbose"}, `serve: -log-level must be debug, info, warn or error, got "verbose"`},
		{[]string{"serve", "-log-level", ""}, "serve: -log-level must be debug, info, warn or error"},

		// complete
		{[]string{"complete", "extra"}, `complete: unexpected argument "extra" (run "idem complete -h")`},
		{[]string{"complete"}, "complete: -provider is required: the completer calls the provider to finish payouts"},
		{[]string{"complete", "-provider", prov, "-ttl", "0s"}, "complete: -ttl must be positive, got 0s"},
		{[]string{"complete", "-provider", prov, "-lease", "10ms"}, "complete: -lease must be at least 1s"},
		{[]string{"complete", "-provider", "nope"}, "complete: -provider must be an http:// or https:// URL"},
		{[]string{"complete", "-provider", prov, "-ledger", file}, "complete: -ledger applies only with a redis:// -db"},
		{[]string{"complete", "-provider", prov, "-db", rdb, "-ledger", rdb}, "complete: -ledger must be a SQL database"},

		// sweep
		{[]string{"sweep", "extra"}, `sweep: unexpected argument "extra" (run "idem sweep -h")`},
		{[]string{"sweep", "-nope"}, "sweep: flag provided but not defined: -nope"},
		{[]string{"sweep", "-batch", "0"}, "sweep: -batch must be positive, got 0"},
		{[]string{"sweep", "-db", rdb}, "sweep: -db redis://127.0.0.1:6379/0 is a Redis server"},

		// inspect
		{[]string{"inspect", "only-scope"}, "inspect: want two arguments, <scope> and <key>"},
		{[]string{"inspect", "a", "b", "c"}, "inspect: want two arguments"},
		{[]string{"inspect", "anonymous", `"unterminated`}, "inspect: idem: invalid idempotency key: unterminated quoted key"},
		{[]string{"inspect", "anonymous", "has space"}, "inspect: idem: invalid idempotency key: byte 0x20 at position 3"},
		{[]string{"inspect", "-db", rdb, "anonymous", "k"}, "inspect reads the records of the SQL database"},

		// demo
		{[]string{"demo", "extra"}, `demo: unexpected argument "extra" (run "idem demo -h")`},
		{[]string{"demo", "-intents", "0"}, "demo: -intents and -clients must be positive and -kills not negative"},
		{[]string{"demo", "-clients", "0"}, "demo: -intents and -clients must be positive"},
		{[]string{"demo", "-kills", "-1"}, "-kills not negative"},
		{[]string{"demo", "-db", "mysql://x"}, `demo: -db must be a postgres:// URL, got "mysql://x"`},
		{[]string{"demo", "--html", filepath.Join(dir, "missing", "report.html")}, "demo: --html " + filepath.Join(dir, "missing", "report.html") + ": open "},

		// bench
		{[]string{"bench", "extra"}, `bench: unexpected argument "extra" (run "idem bench -h")`},
		{[]string{"bench", "-db", rdb}, "bench: -db redis://127.0.0.1:6379/0 is a Redis server"},
		{[]string{"bench", "-concurrency", "1,zero"}, `bench: -concurrency: want positive numbers separated by commas, got "1,zero"`},
		{[]string{"bench", "-duration", "0s"}, "bench: -duration, -storms and -pool must be positive"},
		{[]string{"bench", "-storms", "0"}, "bench: -duration, -storms and -pool must be positive"},
		{[]string{"bench", "-pool", "0"}, "bench: -duration, -storms and -pool must be positive"},

		// import
		{[]string{"import"}, `import: want one argument, the CSV file (run "idem import -h")`},
		{[]string{"import", csv, csv}, "import: want one argument, the CSV file"},
		{[]string{"import", "-concurrency", "-1", csv}, "import: -concurrency must not be negative, got -1"},
		{[]string{"import", csv, "-ttl", "0s"}, "import: -ttl must be positive, got 0s"},
		{[]string{"import", "-batch", " padded", csv}, "import: -batch: starts or ends with a space"},
		{[]string{"import", "-batch", strings.Repeat("b", 256), csv}, "import: -batch: 256 bytes, the limit is 255"},
		{[]string{"import", csv, "-nope"}, "import: flag provided but not defined: -nope"},
		{[]string{"import", "-db", rdb, csv}, "import applies transfers to the ledger"},

		// serve -publish, relay, project
		{[]string{"serve", "-events", "x"}, "serve: -events applies only with -publish"},
		{[]string{"serve", "-publish", "nats://127.0.0.1:4222", "-idempotency", "off"}, "serve: -publish needs -idempotency on"},
		{[]string{"serve", "-publish", "kafka://127.0.0.1:1"}, `serve: -publish: unknown scheme "kafka"`},
		{[]string{"serve", "-publish", "nats://127.0.0.1:4222", "-events", "a.b"}, "serve: -events must be 1 to 64 ASCII letters"},
		{[]string{"relay"}, "relay: -publish URL is required"},
		{[]string{"relay", "-publish", "nowhere"}, "relay: -publish must be a broker URL"},
		{[]string{"relay", "-publish", "nats://127.0.0.1:4222", "-db", "redis://127.0.0.1:6379/0"}, "relay: -db must be the SQL database"},
		{[]string{"project"}, "project: -consume URL is required"},
		{[]string{"project", "-consume", "ftp://x"}, `project: -consume: unknown scheme "ftp"`},
		{[]string{"project", "-consume", "nats://127.0.0.1:4222", "-consume-ttl", "0s"}, "project: -consume-ttl must be positive"},
		{[]string{"project", "-consume", "nats://127.0.0.1:4222", "-events", ""}, "project: -events must be 1 to 64"},
		{[]string{"project", "-consume", "nats://127.0.0.1:4222", "extra"}, `project: unexpected argument "extra"`},
		{[]string{"relay", "-publish", "amqp://guest:guest@127.0.0.1:5672/?heartbeat=abc"}, "relay: -publish amqp://guest:xxxxx@127.0.0.1:5672/?heartbeat=abc: heartbeat is not an uint16"},
		{[]string{"serve", "-publish", "amqp://127.0.0.1:5672/?channel_max=x"}, "serve: -publish amqp://127.0.0.1:5672/?channel_max=x: channel_max"},
		{[]string{"project", "-consume", "amqp://127.0.0.1:5672/?connection_timeout=soon"}, "project: -consume amqp://127.0.0.1:5672/?connection_timeout=soon: connection_timeout"},
		{[]string{"outbox", "-db", "redis://127.0.0.1:6379"}, "outbox: -db must be the SQL database"},
		{[]string{"outbox", "-limit", "0"}, "outbox: -limit must be 1 to 10000"},
		{[]string{"outbox", "-unpark", ""}, "outbox: -unpark needs message ids"},
		{[]string{"outbox", "-unpark", "msg_a,,msg_b"}, "outbox: -unpark needs message ids"},
		{[]string{"outbox", "extra"}, `outbox: unexpected argument "extra"`},

		// check
		{[]string{"check"}, `check: want one URL, got 0 arguments (run "idem check -h")`},
		{[]string{"check", u, u}, "check: want one URL, got 2 arguments"},
		{[]string{"check", "ftp://x/y"}, `check: URL "ftp://x/y": want an http:// or https:// URL`},
		{[]string{"check", "/relative"}, `check: URL "/relative": want an http:// or https:// URL`},
		{[]string{"check", "-H", "no colon", u}, `check: invalid value "no colon" for flag -H: want 'Name: value'`},
		{[]string{"check", u, "--principal2", "nope"}, "flag -principal2: want 'Name: value'"},
		{[]string{"check", u, "--concurrency", "1"}, "check: --concurrency must be at least 2, got 1"},
		{[]string{"check", u, "--effects-path", "count"}, "check: --effects-path needs --effects-url"},
		{[]string{"check", u, "--effects-url", u, "--effects-cmd", "echo 1"}, "check: --effects-url and --effects-cmd: give one way to count"},
		{[]string{"check", u, "--effects-url", "nope"}, `check: --effects-url "nope": want an http:// or https:// URL`},
		{[]string{"check", u, "-d", "@" + filepath.Join(dir, "missing")}, "check: -d: open "},
		{[]string{"check", u, "--d2", "@" + filepath.Join(dir, "missing")}, "check: --d2: open "},
		{[]string{"check", u, "-H", "Idempotency-Key: k"}, "check: -H sets Idempotency-Key: the audit chooses the keys"},
		{[]string{"check", u, "-X", "PO ST"}, `check: -X "PO ST" is not a method`},
		{[]string{"check", u, "--timeout", "0s"}, "check: --timeout must be positive, got 0s"},
		{[]string{"check", u, "--key-header", "a b"}, `check: --key-header "a b" is not a header name`},
		{[]string{"check", "--plan", plan}, "check: --plan " + plan + ": no endpoints"},
		{[]string{"check", "--plan", typo}, "check: --plan " + typo + ": not a JSON plan"},
		{[]string{"check", "--plan", typo, u}, "check: give a URL or --plan, not both"},
		{[]string{"check", "--plan", filepath.Join(dir, "missing.json")}, "check: --plan: open "},
		{[]string{"check", "--nope", u}, "check: flag provided but not defined: -nope"},
	} {
		o, err := parseCommandLine(t, tt.args)
		if err == nil {
			err = o.validate()
		}
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("idem %q: %v, want a usage error containing %q", tt.args, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret")) {
			t.Errorf("idem %q: the error shows a password: %v", tt.args, err)
		}
	}
	// The same table for the command dispatch itself.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, `no command given; try "idem demo"`},
		{[]string{"nope"}, `unknown command "nope"; run "idem help" for the list`},
	} {
		err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(t.Context(), tt.args)
		var ue usageError
		if !errors.As(err, &ue) || err.Error() != tt.want {
			t.Errorf("idem %q: %v, want the usage error %q", tt.args, err, tt.want)
		}
	}
}

// A valid command line of each command passes validate, and the values
// derived from it are set: the table above fails for the reason it names,
// not because every command line is refused.
func TestValidCommandLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	csv := filepath.Join(dir, "rows.csv")
	if err := os.WriteFile(csv, []byte("id,from,to,amount\nr1,a0,a1,5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve"},
		{"serve", "-db", "postgres://u@127.0.0.1:1/db", "-pool", "4", "-replay-probe", "-log-level", "debug"},
		{"serve", "-db", "redis://127.0.0.1:6379/0?prefix=p", "-provider", "http://127.0.0.1:1", "-lease", "2s", "-otlp", "http://127.0.0.1:4318"},
		{"serve", "-consume", "nats://127.0.0.1:4222", "-consume-queue", "q_1", "-consume-ttl", "1h", "-log-level", "error"},
		{"serve", "-replay-cache", "0"},
		{"complete", "-provider", "http://127.0.0.1:1"},
		{"complete", "-db", "redis://127.0.0.1:6379/0", "-ledger", "x.db", "-provider", "http://127.0.0.1:1"},
		{"sweep", "-batch", "10"},
		{"inspect", "anonymous", `"k1"`},
		{"demo", "-kills", "0", "--html", filepath.Join(dir, "report.html")},
		{"bench", "-db", "sqlite", "-db", "x.db", "-concurrency", "1, 2"},
		{"import", csv, "--json", "-concurrency", "2"},
		{"check", "-d", `{"a":1}`, "http://127.0.0.1:1/x", "--json"},
		{"serve", "-publish", "amqp://guest:guest@127.0.0.1:5672/", "-events", "t_1"},
		{"relay", "-publish", "nats://127.0.0.1:4222", "-db", "postgres://u@127.0.0.1:1/db"},
		{"project", "-consume", "amqp://guest:guest@127.0.0.1:5672/", "-db", "p.db", "-addr", "127.0.0.1:0"},
	} {
		o, err := parseCommandLine(t, args)
		if err == nil {
			err = o.validate()
		}
		if err != nil {
			t.Errorf("idem %q: %v, want no error", args, err)
		}
	}
	// The derived values.
	o, _ := parseCommandLine(t, []string{"serve", "-db", "redis://127.0.0.1:6379/0", "-provider", "http://127.0.0.1:1", "-log-level", "warn"})
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if s := o.(*serveOptions); s.sqlDB != defaultDB || s.redisDB != "redis://127.0.0.1:6379/0" || s.level.String() != "WARN" || s.source != nil {
		t.Errorf("serve options: sqlDB %q, redisDB %q, level %s, source set %t; want %q, the -db, WARN, none", s.sqlDB, s.redisDB, s.level, s.source != nil, defaultDB)
	}
	o, _ = parseCommandLine(t, []string{"serve"})
	if err := o.validate(); err != nil || o.(*serveOptions).level.String() != "INFO" {
		t.Errorf("serve's default -log-level: %v, %s; want INFO", err, o.(*serveOptions).level)
	}
	o, _ = parseCommandLine(t, []string{"inspect", "anonymous", `"k1"`})
	if err := o.validate(); err != nil || o.(*inspectOptions).scope != "anonymous" || o.(*inspectOptions).key != "k1" {
		t.Errorf("inspect options: %v, %+v; want scope anonymous, key k1", err, o)
	}
	o, _ = parseCommandLine(t, []string{"import", csv, "--json"})
	if err := o.validate(); err != nil || o.(*importOptions).file != csv || !o.(*importOptions).asJSON {
		t.Errorf("import options: %v, %+v; want the file and --json", err, o)
	}
}
