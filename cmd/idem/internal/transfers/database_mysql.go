package transfers

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/idemkit/idem/mysqlstore"
)

// MySQL returns the ledger's database on the store's MySQL or MariaDB
// database. The ledger's statements are written once, with PostgreSQL's
// $N placeholders; on MySQL each goes through mysqlQ, which rewrites the
// few that MySQL words differently (mysqlRewrites), turns $N into ? (with
// the arguments in the order the ? come), and emulates RETURNING.
//
// The store's connections should count matched rows (the DSN's
// clientFoundRows=true, which idem serve sets): the ledger reads an UPDATE
// that matched no row as "not found".
func MySQL(store *mysqlstore.Store) *Database {
	db := store.DB()
	return &Database{
		schema:       mysqlSchema,
		hasMessageID: `SELECT count(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'transfers' AND COLUMN_NAME = 'message_id'`,
		addMessageID: `ALTER TABLE transfers ADD COLUMN message_id VARCHAR(1024)`,
		// No lock statement: MySQL commits each DDL statement on its own,
		// so a lock of the migration's transaction would not cover them;
		// CREATE TABLE IF NOT EXISTS is safe from two processes at once,
		// and mysqlSchema has every column and index, so a new ledger
		// needs no ALTER.
		// Row locks in id order: InnoDB reads the two rows in primary key
		// order, so that A->B and B->A never deadlock.
		lock: `SELECT count(*), coalesce(max(CASE WHEN id = $2 THEN balance END), 0) FROM accounts WHERE id IN ($1, $2) FOR UPDATE`,
		pool: mysqlQ{r: db, db: db},
		begin: func(ctx context.Context) (txn, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			return mysqlTxn{mysqlQ{r: tx}, tx}, nil
		},
		current: func(ctx context.Context) (querier, bool) {
			// Atomic work and leased local steps alike.
			if tx, ok := mysqlstore.TxFrom(ctx); ok {
				return mysqlQ{r: tx}, true
			}
			return nil, false
		},
	}
}

// mysqlSchema is the ledger's tables with every column and index added
// since they first existed (message_id, batch_id and row_id, the payouts'
// op_key, charge_key and seen_at), one statement per entry: go-sql-driver
// sends one statement at a time. Identifiers compare byte for byte
// (utf8mb4_bin), as in SQLite and PostgreSQL. MySQL has no partial index:
// payouts_pending indexes every payout by seen_at.
var mysqlSchema = strings.Join(mysqlSchemaStatements, ";\n")

var mysqlSchemaStatements = []string{
	`CREATE TABLE IF NOT EXISTS accounts (
	id      VARCHAR(64) NOT NULL PRIMARY KEY,
	balance BIGINT      NOT NULL CHECK (balance >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
	`CREATE TABLE IF NOT EXISTS transfers (
	id         BIGINT        NOT NULL AUTO_INCREMENT PRIMARY KEY,
	src        VARCHAR(64)   NOT NULL,
	dst        VARCHAR(64)   NOT NULL,
	amount     BIGINT        NOT NULL CHECK (amount > 0),
	created_at BIGINT        NOT NULL,
	message_id VARCHAR(1024),
	batch_id   VARCHAR(255),
	row_id     VARCHAR(255),
	FOREIGN KEY (src) REFERENCES accounts (id),
	FOREIGN KEY (dst) REFERENCES accounts (id),
	UNIQUE KEY transfers_batch_row (batch_id, row_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
	`CREATE TABLE IF NOT EXISTS payouts (
	id                 BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	account            VARCHAR(64)  NOT NULL,
	amount             BIGINT       NOT NULL CHECK (amount > 0),
	state              VARCHAR(16)  NOT NULL CHECK (state IN ('pending', 'completed', 'declined')),
	provider_charge_id VARCHAR(255),
	created_at         BIGINT       NOT NULL,
	op_key             VARCHAR(512),
	charge_key         VARCHAR(512),
	seen_at            BIGINT,
	FOREIGN KEY (account) REFERENCES accounts (id),
	UNIQUE KEY payouts_op_key (op_key),
	KEY payouts_pending (seen_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
}

// mysqlRewrites maps the ledger's statements that MySQL words differently
// to MySQL's wording: the upsert, and the catalogue queries of the
// migrations (which, on a ledger made from mysqlSchema, find everything in
// place). A test checks that every key is still a statement of the
// package, so that an edit of one fails loudly rather than reaching MySQL
// in PostgreSQL's words.
var mysqlRewrites = map[string]string{
	`INSERT INTO accounts (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET balance = excluded.balance`: `INSERT INTO accounts (id, balance) VALUES ($1, $2) ON DUPLICATE KEY UPDATE balance = $2`,

	`SELECT count(*) FROM pg_attribute WHERE attrelid = 'transfers'::regclass AND attname IN ('batch_id', 'row_id') AND NOT attisdropped`:                    `SELECT count(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'transfers' AND COLUMN_NAME IN ('batch_id', 'row_id')`,
	`ALTER TABLE transfers ADD COLUMN IF NOT EXISTS batch_id text, ADD COLUMN IF NOT EXISTS row_id text`:                                                     `ALTER TABLE transfers ADD COLUMN batch_id VARCHAR(255), ADD COLUMN row_id VARCHAR(255)`,
	`SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'transfers'::regclass AND c.relname = 'transfers_batch_row'`: `SELECT count(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'transfers' AND INDEX_NAME = 'transfers_batch_row'`,
	`CREATE UNIQUE INDEX IF NOT EXISTS transfers_batch_row ON transfers (batch_id, row_id)`:                                                                  `CREATE UNIQUE INDEX transfers_batch_row ON transfers (batch_id, row_id)`,

	`SELECT count(*) FROM pg_attribute WHERE attrelid = 'payouts'::regclass AND attname = $1 AND NOT attisdropped`:                      `SELECT count(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'payouts' AND COLUMN_NAME = $1`,
	`SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'payouts'::regclass AND c.relname = $1`: `SELECT count(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'payouts' AND INDEX_NAME = $1`,
	`CREATE INDEX IF NOT EXISTS payouts_pending ON payouts (seen_at) WHERE state = 'pending'`:                                           `CREATE INDEX payouts_pending ON payouts (seen_at)`,
	`CREATE UNIQUE INDEX IF NOT EXISTS payouts_op_key ON payouts (op_key)`:                                                              `CREATE UNIQUE INDEX payouts_op_key ON payouts (op_key)`,

	depositsDDL: `CREATE TABLE IF NOT EXISTS deposits (
	id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	deposit_id VARCHAR(255) NOT NULL,
	webhook_id VARCHAR(255) NOT NULL,
	account    VARCHAR(64)  NOT NULL,
	amount     BIGINT       NOT NULL CHECK (amount > 0),
	created_at BIGINT       NOT NULL,
	FOREIGN KEY (account) REFERENCES accounts (id),
	UNIQUE KEY deposits_webhook_id (webhook_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
	settingsDDL: "CREATE TABLE IF NOT EXISTS ledger_settings (name VARCHAR(64) NOT NULL PRIMARY KEY, val VARCHAR(255) NOT NULL) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin",
	setSetting:  `INSERT INTO ledger_settings (name, val) VALUES ($1, $2) ON DUPLICATE KEY UPDATE val = $2`,
	// With the driver's default (no CLIENT_FOUND_ROWS), a row left as it
	// was counts 0 affected: the deposit was recorded before.
	insertDeposit: `INSERT INTO deposits (deposit_id, webhook_id, account, amount, created_at) VALUES ($1, $2, $3, $4, $5) ON DUPLICATE KEY UPDATE webhook_id = webhook_id`,
}

// mysqlQ runs the ledger's statements on MySQL (see MySQL): r is the
// connection pool or a transaction, db the pool when r is (RETURNING of
// an UPDATE then runs in a transaction of its own).
type mysqlQ struct {
	r  sqlRunner
	db *sql.DB
}

var (
	placeholder = regexp.MustCompile(`\$(\d+)`)
	// The RETURNING clauses of the ledger: of an INSERT, the new id; of
	// an UPDATE of one row by id, some of its columns.
	insertReturningID = regexp.MustCompile(`(?s)^(INSERT INTO .*) RETURNING id$`)
	updateReturning   = regexp.MustCompile(`(?s)^(UPDATE (\w+) SET .* WHERE id = (\$\d+).*) RETURNING (.*)$`)
)

// translate returns q in MySQL's words with ? placeholders, and args in
// their order.
func translate(q string, args []any) (string, []any, error) {
	if r, ok := mysqlRewrites[q]; ok {
		q = r
	}
	var out []any
	var bad error
	q = placeholder.ReplaceAllStringFunc(q, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		if n < 1 || n > len(args) {
			bad = fmt.Errorf("transfers: %s has no argument", m)
			return m
		}
		out = append(out, args[n-1])
		return "?"
	})
	return q, out, bad
}

func (q mysqlQ) exec(ctx context.Context, s string, args ...any) (int64, error) {
	if s == mysqlSchema {
		for _, stmt := range mysqlSchemaStatements {
			if _, err := q.r.ExecContext(ctx, stmt); err != nil {
				return 0, err
			}
		}
		return 0, nil
	}
	s, args, err := translate(s, args)
	if err != nil {
		return 0, err
	}
	res, err := q.r.ExecContext(ctx, s, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q mysqlQ) queryRow(ctx context.Context, s string, args ...any) scanner {
	if m := insertReturningID.FindStringSubmatch(s); m != nil {
		n, err := q.insertID(ctx, m[1], args)
		return valuesRow{vals: []any{n}, err: err}
	}
	if m := updateReturning.FindStringSubmatch(s); m != nil {
		return q.updateReturning(ctx, m[1], "SELECT "+m[4]+" FROM "+m[2]+" WHERE id = "+m[3], args)
	}
	s, args, err := translate(s, args)
	if err != nil {
		return valuesRow{err: err}
	}
	return sqlRow{q.r.QueryRowContext(ctx, s, args...)}
}

func (q mysqlQ) query(ctx context.Context, s string, args ...any) (rows, error) {
	s, args, err := translate(s, args)
	if err != nil {
		return nil, err
	}
	r, err := q.r.QueryContext(ctx, s, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

// insertID runs an INSERT and returns the id it made (LAST_INSERT_ID, which
// the driver returns with the statement's result).
func (q mysqlQ) insertID(ctx context.Context, s string, args []any) (int64, error) {
	s, args, err := translate(s, args)
	if err != nil {
		return 0, err
	}
	res, err := q.r.ExecContext(ctx, s, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// updateReturning runs update, then sel, which reads the row it updated,
// in one transaction: r's, or one of its own on the pool. An UPDATE that
// matched no row is "no rows".
func (q mysqlQ) updateReturning(ctx context.Context, update, sel string, args []any) scanner {
	run := func(r sqlRunner) ([]any, error) {
		in := mysqlQ{r: r}
		n, err := in.exec(ctx, update, args...)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errNoRows
		}
		s, a, err := translate(sel, args)
		if err != nil {
			return nil, err
		}
		rs, err := r.QueryContext(ctx, s, a...)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		if !rs.Next() {
			if err := rs.Err(); err != nil {
				return nil, err
			}
			return nil, errNoRows
		}
		cols, err := rs.Columns()
		if err != nil {
			return nil, err
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		return vals, rs.Err()
	}
	if q.db == nil {
		vals, err := run(q.r)
		return valuesRow{vals: vals, err: err}
	}
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return valuesRow{err: err}
	}
	vals, err := run(tx)
	if err != nil {
		_ = tx.Rollback()
		return valuesRow{err: err}
	}
	return valuesRow{vals: vals, err: tx.Commit()}
}

type mysqlTxn struct {
	mysqlQ
	tx *sql.Tx
}

func (t mysqlTxn) commit(context.Context) error   { return t.tx.Commit() }
func (t mysqlTxn) rollback(context.Context) error { return t.tx.Rollback() }

// valuesRow is a row read already: Scan converts its values as
// database/sql does.
type valuesRow struct {
	vals []any
	err  error
}

func (r valuesRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("transfers: scan of %d values into %d destinations", len(r.vals), len(dest))
	}
	for i, v := range r.vals {
		if err := convertAssign(dest[i], v); err != nil {
			return fmt.Errorf("transfers: column %d: %w", i, err)
		}
	}
	return nil
}

// convertAssign stores v, as go-sql-driver returns it (int64, []byte,
// nil), in dest, for the destinations the ledger scans into.
func convertAssign(dest, v any) error {
	switch d := dest.(type) {
	case *int64:
		switch x := v.(type) {
		case int64:
			*d = x
			return nil
		case []byte:
			n, err := strconv.ParseInt(string(x), 10, 64)
			*d = n
			return err
		}
	case *int:
		var n int64
		if err := convertAssign(&n, v); err != nil {
			return err
		}
		*d = int(n)
		return nil
	case *string:
		switch x := v.(type) {
		case []byte:
			*d = string(x)
			return nil
		case string:
			*d = x
			return nil
		case int64:
			*d = strconv.FormatInt(x, 10)
			return nil
		case nil:
			*d = ""
			return nil
		}
	case *any:
		*d = v
		return nil
	}
	return fmt.Errorf("cannot store %T in %T", v, dest)
}
