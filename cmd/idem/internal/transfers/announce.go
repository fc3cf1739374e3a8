package transfers

import (
	"context"
	"errors"
	"fmt"
)

// The ledger remembers whether its transfers are announced: idem serve
// -publish marks it, idem serve without -publish unmarks it, and idem
// import, which has no broker of its own, stages the events of its rows
// when the ledger is marked. The relay of idem serve -publish, or idem
// relay, publishes them.

// settingsDDL is the ledger's settings table (on MySQL, through
// mysqlRewrites).
const settingsDDL = `CREATE TABLE IF NOT EXISTS ledger_settings (name TEXT PRIMARY KEY, val TEXT NOT NULL)`

const (
	setSetting = `INSERT INTO ledger_settings (name, val) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET val = excluded.val`
	getSetting = `SELECT val FROM ledger_settings WHERE name = $1`
)

// announcedSetting is the setting SetAnnounced writes.
const announcedSetting = "events"

func (db *Database) migrateSettings(ctx context.Context) error {
	if _, err := db.pool.exec(ctx, settingsDDL); err != nil {
		return fmt.Errorf("create ledger_settings: %w", err)
	}
	return nil
}

// SetAnnounced records whether the ledger's transfers are announced (idem
// serve -publish), for Announced. The ledger must be migrated (New,
// Migrate).
func (db *Database) SetAnnounced(ctx context.Context, on bool) error {
	val := "off"
	if on {
		val = "on"
	}
	if _, err := db.pool.exec(ctx, setSetting, announcedSetting, val); err != nil {
		return fmt.Errorf("transfers: record that events are %s: %w", val, err)
	}
	return nil
}

// Announced reports whether the last SetAnnounced said the ledger's
// transfers are announced; false if it never ran. The ledger must be
// migrated (New, Migrate).
func (db *Database) Announced(ctx context.Context) (bool, error) {
	var val string
	err := db.pool.queryRow(ctx, getSetting, announcedSetting).Scan(&val)
	if errors.Is(err, errNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("transfers: read whether events are announced: %w", err)
	}
	return val == "on", nil
}
