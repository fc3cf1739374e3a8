package pgstore

import "github.com/idemkit/idem/pgstore/internal/pgschema"

// Config configures a Store. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Schema is the schema that holds the records table and its migration
	// table. Migrate creates it if it does not exist. Defaults to "public".
	Schema string

	// Table is the name of the records table. The migration table is
	// named after it with the suffix "_migrations". Defaults to
	// "idem_records".
	Table string

	// SkipMigrate stops New and Open from applying the migrations; call
	// Migrate yourself (or apply the SQL with your own tool) before the
	// first Begin. Defaults to false: New applies them.
	SkipMigrate bool

	// ReplayProbe makes Begin first look for a live record, and test the
	// key's lock, outside any transaction, in one round trip. A replay or
	// an in-flight refusal then costs one round trip instead of two, and
	// a first execution one more (three instead of two besides the work).
	// Turn it on where retries are a large share of the traffic. Defaults
	// to false.
	ReplayProbe bool
}

// Defaults of Config.
const (
	DefaultSchema = "public"
	DefaultTable  = "idem_records"
)

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Schema == "" {
		out.Schema = DefaultSchema
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	return out, out.validate()
}

func (c *Config) validate() error {
	return pgschema.Validate(c.Schema, c.Table)
}
