package pgschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/outbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestLockKeyIsStable(t *testing.T) {
	// The lock key is shared by every process on a table, of pgstore and
	// sqldb alike, across releases: two that hash differently would run
	// the same key at once. These values were computed by pgstore before
	// the hash moved here; they must never change.
	t.Parallel()
	tests := []struct {
		schema, table, scope, key string
		want                      int64
	}{
		{"public", "idem_records", "s", "k", 77224132866607653},
		{"public", "idem_records", "alice", "transfer-1", 8971901036579918781},
		{`we"ird`, "T", "", "", 7907610170059438487},
	}
	for _, tt := range tests {
		if got := LockKey(NewNames(tt.schema, tt.table).Table, tt.scope, tt.key); got != tt.want {
			t.Errorf("LockKey(%q.%q, %q, %q) = %d, want %d", tt.schema, tt.table, tt.scope, tt.key, got, tt.want)
		}
	}
	// The length prefixes keep (scope, key) pairs that concatenate alike
	// apart.
	table := NewNames("public", "idem_records").Table
	if LockKey(table, "ab", "c") == LockKey(table, "a", "bc") {
		t.Error(`LockKey("ab", "c") == LockKey("a", "bc")`)
	}
}

func TestNewNamesQuotes(t *testing.T) {
	t.Parallel()
	n := NewNames(`s"x`, "t")
	want := Names{Schema: `"s""x"`, Table: `"s""x"."t"`, Migrations: `"s""x"."t_migrations"`, PKey: `"t_pkey"`, ExpiresIdx: `"t_expires_at_idx"`,
		PendingIdx: `"t_pending_idx"`, Steps: `"s""x"."t_steps"`, StepsPKey: `"t_steps_pkey"`, BeginFunc: `"s""x"."t_begin"`,
		Audit:  `"s""x"."t_audit"`,
		Outbox: `"s""x"."t_outbox"`, OutboxID: `"t_outbox_id"`, OutboxPending: `"t_outbox_pend"`, OutboxSent: `"t_outbox_sent"`,
		OutboxChannel: `s"x.t_outbox`, OutboxLockNS: outboxLockNS(`s"x`, "t")}
	if n != want {
		t.Errorf("NewNames = %+v, want %+v", n, want)
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    Settings
		field string // "" = valid
	}{
		{"Zero", Settings{}, ""},
		{"Quoted", Settings{Schema: `we"ird schema`, Table: `Tab; DROP TABLE x`}, ""},
		{"LongestTable", Settings{Schema: "s", Table: strings.Repeat("t", 48)}, ""},
		{"LongestIdle", Settings{IdleInTransactionTimeout: maxIdle}, ""},
		{"NoIdle", Settings{IdleInTransactionTimeout: -1}, ""},
		{"LongSchema", Settings{Schema: strings.Repeat("s", 64)}, "Config.Schema"},
		{"LongTable", Settings{Table: strings.Repeat("t", 49)}, "Config.Table"},
		{"NulTable", Settings{Table: "a\x00b"}, "Config.Table"},
		{"BadUTF8", Settings{Schema: "\xff"}, "Config.Schema"},
		{"LongIdle", Settings{IdleInTransactionTimeout: maxIdle + time.Millisecond}, "Config.IdleInTransactionTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.WithDefaults("pkg")
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("WithDefaults: %v, want nil", err)
			case tt.field != "" && (err == nil || !strings.Contains(err.Error(), tt.field) || !strings.HasPrefix(err.Error(), "pkg: ")):
				t.Errorf("WithDefaults: %v, want an error of pkg naming %s", err, tt.field)
			}
			if tt.field == "" && (got.Schema != tt.in.Schema || got.Table == "" || got.IdleInTransactionTimeout == 0) {
				t.Errorf("WithDefaults = %+v: want Schema kept, Table and the idle timeout set", got)
			}
		})
	}
	got, _ := Settings{}.WithDefaults("pkg")
	if got.Table != DefaultTable || got.IdleInTransactionTimeout != DefaultIdleInTransactionTimeout {
		t.Errorf("defaults = %+v", got)
	}
}

func TestQuote(t *testing.T) {
	// The quoting pgx's Identifier.Sanitize does, without pgx.
	t.Parallel()
	for in, want := range map[string]string{
		"t":                 `"t"`,
		`we"ird`:            `"we""ird"`,
		`"`:                 `""""`,
		"Tab; DROP TABLE x": `"Tab; DROP TABLE x"`,
		"":                  `""`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
		if got := (pgx.Identifier{in}).Sanitize(); got != want {
			t.Errorf("pgx's Sanitize(%q) = %s, want %s: the two quotings differ", in, got, want)
		}
	}
}

// pqError has the shape of lib/pq's *pq.Error: a pointer type whose
// SQLState method returns the code.
type pqError struct{ code string }

func (e *pqError) Error() string    { return "pq: something (" + e.code + ")" }
func (e *pqError) SQLState() string { return e.code }

func TestErrorsOfAnyDriver(t *testing.T) {
	// A SQLSTATE is read from any error in the chain that has a
	// SQLState method: pgx's *pgconn.PgError, lib/pq's *pq.Error, or
	// another driver's.
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		unique    bool
		transient bool
	}{
		{"PgxUnique", &pgconn.PgError{Code: "23505"}, true, false},
		{"PqUnique", &pqError{"23505"}, true, false},
		{"WrappedPqUnique", fmt.Errorf("insert: %w", &pqError{"23505"}), true, false},
		{"PgxSerialization", &pgconn.PgError{Code: "40001"}, false, true},
		{"PqDeadlock", &pqError{"40P01"}, false, true},
		{"PqAdminShutdown", fmt.Errorf("x: %w", &pqError{"57P01"}), false, true},
		{"PqConnectionClass", &pqError{"08006"}, false, true},
		{"PqTooManyConnections", &pqError{"53300"}, false, true},
		{"PqUndefinedTable", &pqError{"42P01"}, false, false},
		{"PqForeignKey", &pqError{"23503"}, false, false},
		{"EmptyCode", &pqError{""}, false, false},
		{"Network", errors.New("read: connection reset by peer"), false, true},
		{"Nil", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsUniqueViolation(tt.err); got != tt.unique {
				t.Errorf("IsUniqueViolation(%v) = %v, want %v", tt.err, got, tt.unique)
			}
			if got := Transient(tt.err); got != tt.transient {
				t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.transient)
			}
		})
	}
}

func TestStatementsShareOneTable(t *testing.T) {
	t.Parallel()
	n := NewNames("s", "t")
	st := NewStatements(n, 30*time.Second)
	if !strings.Contains(st.Lock, "client_connection_check_interval") || strings.Contains(st.LockPlain, "client_connection_check_interval") {
		t.Errorf("Lock sets the connection check and LockPlain does not: %q / %q", st.Lock, st.LockPlain)
	}
	for _, l := range []string{st.Lock, st.LockPlain} {
		if !strings.Contains(l, "'idle_in_transaction_session_timeout', '30000', true") {
			t.Errorf("the lock does not set the idle timeout for the transaction: %q", l)
		}
	}
	if strings.Contains(st.TryLock, "set_config") {
		t.Errorf("TryLock sets something: %q", st.TryLock)
	}
	for idle, want := range map[time.Duration]string{time.Nanosecond: "'1'", 1500 * time.Microsecond: "'2'", -1: ""} {
		l := NewStatements(n, idle).LockPlain
		if got := strings.Contains(l, "idle_in_transaction_session_timeout"); got != (want != "") || !strings.Contains(l, want) {
			t.Errorf("NewStatements(%s).LockPlain = %q, want the timeout %s", idle, l, want)
		}
	}
	for name, sql := range map[string]string{"Select": st.Select, "Delete": st.Delete, "Insert": st.Insert, "Sweep": st.Sweep, "Probe": st.Probe} {
		if !strings.Contains(sql, n.Table) {
			t.Errorf("%s does not name %s: %s", name, n.Table, sql)
		}
	}
	// The lock is its own statement; the read that decides must not be
	// fused with it (docs/DESIGN.md, pitfall "snapshot before lock").
	if strings.Contains(st.Select, "advisory") || strings.Contains(st.Lock, n.Table) {
		t.Errorf("Lock and Select are fused: %q / %q", st.Lock, st.Select)
	}
}

func TestConnCheck(t *testing.T) {
	t.Parallel()
	st := NewStatements(NewNames("s", "t"), time.Second)
	var c ConnCheck
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	detect := func(ctx context.Context) (bool, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
			return false, errors.New("first detection fails")
		}
		return true, nil
	}
	leader := make(chan error, 1)
	go func() {
		_, err := c.Lock(context.Background(), &st, detect)
		leader <- err
	}()
	<-entered
	// A caller that arrives while the detection runs waits only as long
	// as its own context allows.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Lock(ctx, &st, detect); !errors.Is(err, context.Canceled) {
		t.Errorf("waiter with an ended ctx: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-leader; err == nil {
		t.Error("leader: nil error, want the failed detection")
	}
	// A failed detection is not remembered; a success is.
	for range 2 {
		l, err := c.Lock(context.Background(), &st, detect)
		if err != nil || l != st.Lock {
			t.Errorf("Lock = %q, %v; want the checking statement", l, err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("detections = %d, want 2 (one failed, one remembered)", n)
	}
	c.Forget()
	if _, err := c.Lock(context.Background(), &st, detect); err != nil || calls.Load() != 3 {
		t.Errorf("after Forget: err=%v detections=%d, want a new detection", err, calls.Load())
	}
}

func TestConnCheckSurvivesAPanic(t *testing.T) {
	t.Parallel()
	st := NewStatements(NewNames("s", "t"), time.Second)
	var c ConnCheck
	func() {
		defer func() { _ = recover() }()
		_, _ = c.Lock(context.Background(), &st, func(context.Context) (bool, error) { panic("detect") })
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l, err := c.Lock(ctx, &st, func(context.Context) (bool, error) { return false, nil }); err != nil || l != st.LockPlain {
		t.Errorf("after a panicking detection: %q, %v; want a new detection", l, err)
	}
}

func TestLeasedStatements(t *testing.T) {
	// Every write of a holder carries the fence (docs/DESIGN.md, L2), and
	// the local step's statements set what Lock sets.
	t.Parallel()
	n := NewNames("s", "t")
	st := NewLeasedStatements(n, 30*time.Second)
	for name, sql := range map[string]string{"Heartbeat": st.Heartbeat, "SaveStep": st.SaveStep, "Complete": st.Complete,
		"Release": st.Release, "BeginStep": st.BeginStep, "BeginStepPlain": st.BeginStepPlain} {
		if !strings.Contains(sql, fence) {
			t.Errorf("%s is not fenced: %s", name, sql)
		}
	}
	for name, sql := range map[string]string{"SaveStep": st.SaveStep, "BeginStep": st.BeginStep, "BeginStepPlain": st.BeginStepPlain} {
		if !strings.Contains(sql, "FOR UPDATE") {
			t.Errorf("%s does not lock the record's row: %s", name, sql)
		}
	}
	if !strings.Contains(st.BeginStep, "client_connection_check_interval") || strings.Contains(st.BeginStepPlain, "client_connection_check_interval") {
		t.Errorf("BeginStep sets the connection check and BeginStepPlain does not: %q / %q", st.BeginStep, st.BeginStepPlain)
	}
	for _, sql := range []string{st.BeginStep, st.BeginStepPlain} {
		if !strings.Contains(sql, "'idle_in_transaction_session_timeout', '30000', true") {
			t.Errorf("BeginStep does not set the idle timeout: %q", sql)
		}
	}
	if !strings.Contains(st.Claim, "'2200-01-01T00:00:00Z'::timestamptz") {
		t.Errorf("Claim does not write idem.PendingExpiresAt: %s", st.Claim)
	}
}

func TestNamesFitTheIdentifierLimit(t *testing.T) {
	// Every object named after the longest table Check takes fits in
	// PostgreSQL's 63 bytes, the sequence of the steps' identity column
	// included, which PostgreSQL names "<table>_steps_seq_seq".
	t.Parallel()
	table := strings.Repeat("t", maxTableLen)
	if err := (Settings{Table: table}).Check("pkg"); err != nil {
		t.Fatal(err)
	}
	n := NewNames("s", table)
	for _, q := range []string{n.PKey, n.ExpiresIdx, n.PendingIdx, n.StepsPKey, strings.TrimPrefix(n.Migrations, `"s".`),
		strings.TrimPrefix(n.Steps, `"s".`), Quote(table + "_steps_seq_seq"),
		strings.TrimPrefix(n.Audit, `"s".`), Quote(table + "_audit_id_seq")} {
		if name := strings.Trim(q, `"`); len(name) > 63 {
			t.Errorf("%s is %d bytes, more than 63", name, len(name))
		}
	}
}

func TestFirstSeqsAndLeaveOut(t *testing.T) {
	env := func(id, pk string) outbox.Envelope { return outbox.Envelope{ID: id, PartitionKey: pk} }
	if got := FirstSeqs([]outbox.Envelope{env("x", ""), env("y", "")}, map[string]int64{"x": 1, "y": 2}); got != "" {
		t.Errorf("FirstSeqs of no key = %q, want empty", got)
	}
	msgs := []outbox.Envelope{env("1", "a"), env("2", ""), env("3", "b"), env("4", "a"), env("5", `q"<`)}
	seq := map[string]int64{"1": 3, "2": 4, "3": 5, "4": 6, "5": 7}
	got := FirstSeqs(msgs, seq)
	var m map[string]int64
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatalf("FirstSeqs = %q: %v", got, err)
	}
	if len(m) != 3 || m["a"] != 3 || m["b"] != 5 || m[`q"<`] != 7 {
		t.Errorf("FirstSeqs = %v, want a:3 b:5 q\"<:7", m)
	}
	kept := LeaveOut(msgs, seq, []string{"a"})
	if len(kept) != 3 || kept[0].ID != "2" || kept[1].ID != "3" || kept[2].ID != "5" {
		t.Errorf("LeaveOut(a) kept %v, want messages 2, 3 and 5", kept)
	}
	if _, ok := seq["1"]; ok || len(seq) != 3 {
		t.Errorf("LeaveOut(a) left seq %v, want a's messages removed", seq)
	}
}
