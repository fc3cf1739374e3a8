package effect

import (
	"context"
	"database/sql"
	"net/http"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

type server struct {
	db   *sql.DB
	pool *pgxpool.Pool
	g    *idem.Guard
}

func captured(ctx context.Context, g *idem.Guard, db *sql.DB) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		_, err := db.ExecContext(ctx, "INSERT INTO orders(id) VALUES ($1)", 1) // want `ExecContext on \*sql.DB in work given to Guard.Do writes outside the guard's transaction`
		return idem.Result{}, err
	})
}

func (s *server) field(ctx context.Context) {
	s.g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		_, err := s.pool.Exec(ctx, "UPDATE stock SET n = n - 1") // want `Exec on \*pgxpool.Pool in work given to Guard.Do writes`
		return idem.Result{}, err
	})
}

func dynamic(ctx context.Context, g *idem.Guard, db *sql.DB, q string) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		_, err := db.Exec(q) // want `Exec on \*sql.DB`
		return idem.Result{}, err
	})
}

func returning(ctx context.Context, g *idem.Guard, conn *pgx.Conn) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		var id int
		err := conn.QueryRow(ctx, "INSERT INTO t DEFAULT VALUES RETURNING id").Scan(&id) // want `QueryRow on \*pgx.Conn`
		return idem.Result{}, err
	})
}

func ownTx(ctx context.Context, g *idem.Guard, db *sql.DB) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		tx, err := db.BeginTx(ctx, nil) // want `BeginTx on \*sql.DB .* begins a transaction of its own`
		if err != nil {
			return idem.Result{}, err
		}
		return idem.Result{}, tx.Commit()
	})
}

func (s *server) save(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM carts WHERE id = 1") // want `ExecContext on \*sql.DB in save, called from work given to Guard.Do`
	return err
}

func (s *server) helper(ctx context.Context) {
	s.g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		return idem.Result{}, s.save(ctx)
	})
}

func (s *server) named(ctx context.Context) (idem.Result, error) {
	_, err := s.db.ExecContext(ctx, "insert into audit values (1)") // want `in work given to Guard.Do`
	return idem.Result{}, err
}

func (s *server) methodValue(ctx context.Context) {
	s.g.Do(ctx, idem.Request{}, s.named)
}

func handlers(m *idemhttp.Middleware, db *sql.DB) {
	m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		db.ExecContext(r.Context(), "INSERT INTO a VALUES (1)") // want `in handler given to Middleware.Handler`
	}))
	m.Route(idemhttp.RouteOptions{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		db.ExecContext(r.Context(), "INSERT INTO a VALUES (2)") // want `in handler given to Middleware.Route`
	}))
	// A leased route: leased work, not atomic; this analyzer leaves it.
	m.Route(idemhttp.RouteOptions{Leased: true, Kind: "k"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		db.ExecContext(r.Context(), "INSERT INTO a VALUES (3)")
	}))
}

func inboxAndBatch(ctx context.Context, ib *inbox.Inbox, g *idem.Guard, pool *pgxpool.Pool) {
	ib.Process(ctx, &inbox.Message{}, func(ctx context.Context, m *inbox.Message) error {
		_, err := pool.Exec(ctx, "INSERT INTO seen VALUES ($1)", m.ID) // want `in inbox handler given to Inbox.Process`
		return err
	})
	batch.Run(ctx, g, nil, []batch.Item[int]{}, func(ctx context.Context, it batch.Item[int]) (idem.Result, error) {
		_, err := pool.Exec(ctx, "UPDATE rows SET done = true WHERE id = $1", it.ID) // want `in batch row func given to batch.Run`
		return idem.Result{}, err
	})
}

// The false positives a reviewer would reject.

func throughTx(ctx context.Context, g *idem.Guard) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqlitestore.TxFrom(ctx)
		_, err := tx.ExecContext(ctx, "INSERT INTO orders(id) VALUES (1)")
		return idem.Result{}, err
	})
}

func throughPgTx(ctx context.Context, g *idem.Guard) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := pgstore.TxFrom(ctx)
		_, err := tx.Exec(ctx, "INSERT INTO orders(id) VALUES (1)")
		return idem.Result{}, err
	})
}

func reads(ctx context.Context, g *idem.Guard, db *sql.DB, pool *pgxpool.Pool, q string) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		var n int
		db.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n)
		pool.Query(ctx, "-- price list\nSELECT price FROM items")
		db.QueryContext(ctx, q)
		return idem.Result{}, nil
	})
}

func outside(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, "INSERT INTO orders(id) VALUES (1)")
	return err
}

func ignored(ctx context.Context, g *idem.Guard, db *sql.DB) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		//idemvet:ignore the audit log must survive a rollback on purpose
		db.ExecContext(ctx, "INSERT INTO audit VALUES (1)")
		//idemvet:ignore
		db.ExecContext(ctx, "INSERT INTO audit VALUES (2)") // want `ExecContext on \*sql.DB`
		return idem.Result{}, nil
	})
}
