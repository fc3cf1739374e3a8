package inbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox/inboxtest"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/mysqlstore"
)

func TestInboxMySQL(t *testing.T) {
	mysqltest.Require(t)
	inboxtest.Run(t, inboxtest.Harness{
		// A fresh database per case; the location is a DSN that uses it.
		NewLocation: func(t testing.TB) string {
			_, dsn := mysqltest.Database(t)
			return dsn
		},
		Open: func(ctx context.Context, dsn string) (idem.Store, error) {
			s, err := mysqlstore.Open(ctx, dsn, nil)
			if err != nil {
				return nil, err
			}
			s.DB().SetMaxOpenConns(4)
			if _, err := s.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS effects (name VARBINARY(255) NOT NULL)`); err != nil {
				_ = s.Close()
				return nil, err
			}
			return s, nil
		},
		Close:      func(s idem.Store) error { return s.(*mysqlstore.Store).Close() },
		Persistent: true,
		Effect: func(ctx context.Context, name string) error {
			tx, ok := mysqlstore.TxFrom(ctx)
			if !ok {
				return errors.New("no mysqlstore transaction in the context")
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES (?)`, name)
			return err
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			var n int
			err := s.(*mysqlstore.Store).DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM effects WHERE name = ?`, name).Scan(&n)
			return n, err
		},
	})
}
