package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// A database file written at schema version 1 (before leased mode): the
// tools' opens refuse it with ErrSchema, a writing Open migrates it in
// place, its records keep their results and read with leased mode's
// defaults, and leased mode then works on it.
func TestVersion1FileUpgrades(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	created := t0.Add(-time.Minute)
	rawExec(t, path,
		`PRAGMA journal_mode=WAL`,
		`CREATE TABLE idem_schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO idem_schema_version (version) VALUES (1)`,
		sqlitestore.Migrations()[0],
		`INSERT INTO idem_records (scope, key, fingerprint, state, status, header, body, created_at, expires_at)
		 VALUES ('s', 'old', 'fp', 'completed', 201, '{"X-A":["1"]}', X'6f6b', `+strconv.FormatInt(created.UnixNano(), 10)+`, `+strconv.FormatInt(t0.UnixNano(), 10)+`)`)

	for name, cfg := range map[string]*sqlitestore.Config{"ReadOnly": {ReadOnly: true}, "SkipMigrate": {SkipMigrate: true}} {
		if s, err := sqlitestore.Open(ctx, path, cfg); !errors.Is(err, sqlitestore.ErrSchema) {
			if err == nil {
				s.Close()
			}
			t.Errorf("%s open of a version 1 file: err = %v, want ErrSchema", name, err)
		}
	}

	s, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.DB().QueryRow(`SELECT version FROM idem_schema_version`).Scan(&v); err != nil || v != sqlitestore.SchemaVersion || v < 2 {
		t.Fatalf("schema version after Open = %d, %v; want %d", v, err, sqlitestore.SchemaVersion)
	}
	rec := lookupRecord(t, s, "old")
	if rec.State != idem.StateCompleted || rec.Result.Status != 201 || string(rec.Result.Body) != "ok" ||
		rec.Result.Header["X-A"][0] != "1" || !rec.CreatedAt.Equal(created) || !rec.ExpiresAt.Equal(t0) ||
		rec.Token != 0 || !rec.LeaseUntil.IsZero() || rec.Kind != "" || rec.Input != nil || rec.Attempts != 0 || rec.LastError != "" || rec.TTL != 0 {
		t.Errorf("version 1 record after the upgrade = %+v", rec)
	}
	// The old record replays to a leased claim while live, and is claimed
	// once expired.
	if c := claimAt(t, s, "old", "fp", t0.Add(-time.Nanosecond)); c.Claimed || c.Record.Result.Status != 201 {
		t.Errorf("claim of the live version 1 record = %+v", c)
	}
	c := claimAt(t, s, "old", "fp", t0)
	if !c.Claimed {
		t.Fatalf("claim of the expired version 1 record = %+v", c)
	}
	if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: "one", Output: []byte("x"), Now: t0}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Upgraded, the file opens for the tools, and reopens without
	// migrating again.
	ro, err := sqlitestore.Open(ctx, path, &sqlitestore.Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of the upgraded file: %v", err)
	}
	if got, err := ro.Abandoned(ctx, &idem.AbandonedParams{Now: t0.Add(lease), Limit: 10}); err != nil || len(got) != 1 || got[0].Key != "old" {
		t.Errorf("Abandoned on the upgraded file = %v, %v", got, err)
	}
	ro.Close()
	s2, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	c2 := claimAt(t, s2, "old", "fp", t0.Add(lease))
	if !c2.Claimed || stepNames(c2.Steps) != "one=x;" {
		t.Errorf("takeover after reopening = %+v", c2)
	}
}

// A database file written at schema version 2 (leased mode, before records
// kept their TTL): Open migrates it, its pending record reads with TTL 0
// ("unknown") and completes with the engine's TTL, and a new claim keeps
// its own.
func TestVersion2FileUpgrades(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v2.db")
	rawExec(t, path,
		`PRAGMA journal_mode=WAL`,
		`CREATE TABLE idem_schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO idem_schema_version (version) VALUES (2)`,
		sqlitestore.Migrations()[0],
		sqlitestore.Migrations()[1],
		`INSERT INTO idem_records (scope, key, fingerprint, state, status, header, body, created_at, expires_at,
		   token, lease_until, kind, input, attempts, last_error)
		 VALUES ('s', 'old', 'fp', 'pending', 0, NULL, X'', `+strconv.FormatInt(t0.UnixNano(), 10)+`, `+
			strconv.FormatInt(idem.PendingExpiresAt.UnixNano(), 10)+`, 7, `+strconv.FormatInt(t0.UnixNano(), 10)+`, 'payout', X'', 1, 'crashed')`)

	s, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rec := lookupRecord(t, s, "old"); rec.State != idem.StatePending || rec.Token != 7 || rec.TTL != 0 {
		t.Fatalf("version 2 pending record after the upgrade = %+v, want pending, token 7, TTL 0", rec)
	}
	l, err := idem.NewLeased(s, &idem.LeasedConfig{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = l.Do(ctx, idem.LeasedRequest{Scope: "s", Key: "old", Fingerprint: "fp", TTL: time.Hour},
		func(context.Context, *idem.Run) (idem.Result, error) { return idem.Result{Status: 201}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if rec := lookupRecord(t, s, "old"); rec.State != idem.StateCompleted || !rec.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("old record completed by a takeover: %s, expires %s; want completed at %s (the taker's TTL: the record had none)",
			rec.State, rec.ExpiresAt, t0.Add(time.Hour))
	}
	c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "new", Fingerprint: "fp", TTL: 72 * time.Hour, Now: t0, Lease: lease})
	if err != nil || !c.Claimed || c.Record.TTL != 72*time.Hour {
		t.Fatalf("new claim on the upgraded file = %+v, %v; want claimed with TTL 72h", c, err)
	}
	if rec := lookupRecord(t, s, "new"); rec.TTL != 72*time.Hour {
		t.Errorf("new record's TTL read back = %s, want 72h", rec.TTL)
	}
}
