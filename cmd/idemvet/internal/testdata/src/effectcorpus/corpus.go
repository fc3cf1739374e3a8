// Package effectcorpus is effectoutsidetx's corpus: small programs in the
// shapes a service takes, one case a func. "// want" marks a true
// positive, "// nearmiss" a program that must not be reported.
package effectcorpus

import (
	"context"
	"database/sql"
	"encoding/json"
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

type Order struct {
	ID    string
	Total int
}

type Service struct {
	DB    *sql.DB
	Pool  *pgxpool.Pool
	Guard *idem.Guard
	MW    *idemhttp.Middleware
	Inbox *inbox.Inbox
}

const insertOrder = "INSERT INTO orders(id, total) VALUES ($1, $2)"

func (s *Service) CreateOrder(ctx context.Context, key string, o Order) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		if _, err := s.DB.ExecContext(ctx, insertOrder, o.ID, o.Total); err != nil { // want `ExecContext`
			return idem.Result{}, err
		}
		return idem.Result{Body: []byte(o.ID)}, nil
	})
	return err
}

const reserveStock = `
	UPDATE stock SET reserved = reserved + 1 WHERE sku = $1`

func (s *Service) ReserveStock(ctx context.Context, key, sku string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		_, err := s.Pool.Exec(ctx, reserveStock, sku) // want `Exec`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) RefundPayment(ctx context.Context, key, id string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqlitestore.TxFrom(ctx)
		if _, err := tx.ExecContext(ctx, "UPDATE payments SET refunded = 1 WHERE id = ?", id); err != nil {
			return idem.Result{}, err
		}
		_, err := s.DB.ExecContext(ctx, "INSERT INTO ledger(payment) VALUES (?)", id) // want `ExecContext`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) ArchiveCart(ctx context.Context, key string, conn *sql.Conn) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		_, err := conn.ExecContext(ctx, "DELETE FROM carts WHERE key = ?", key) // want `ExecContext on \*sql.Conn`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) RenameCustomer(ctx context.Context, key string, conn *pgx.Conn, name string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		var id int
		err := conn.QueryRow(ctx, "UPDATE customers SET name = $1 RETURNING id", name).Scan(&id) // want `QueryRow`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) SignupHandler() http.Handler {
	return s.MW.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u struct{ Email string }
		json.NewDecoder(r.Body).Decode(&u)
		if _, err := s.DB.ExecContext(r.Context(), "INSERT INTO users(email) VALUES (?)", u.Email); err != nil { // want `ExecContext`
			http.Error(w, err.Error(), 500)
		}
	}))
}

func (s *Service) HandleShipment(ctx context.Context, m *inbox.Message) error {
	_, err := s.Pool.Exec(ctx, "INSERT INTO shipments(msg) VALUES ($1)", m.ID) // want `Exec`
	return err
}

func (s *Service) ConsumeShipments(ctx context.Context, m *inbox.Message) {
	s.Inbox.Process(ctx, m, s.HandleShipment)
}

func (s *Service) ImportPrices(ctx context.Context, items []batch.Item[int]) error {
	_, err := batch.Run(ctx, s.Guard, nil, items, func(ctx context.Context, it batch.Item[int]) (idem.Result, error) {
		_, err := s.Pool.Exec(ctx, "UPSERT INTO prices VALUES ($1, $2)", it.ID, it.Body) // want `Exec`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) MigrateTenant(ctx context.Context, key, ddl string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		_, err := s.DB.ExecContext(ctx, ddl) // want `ExecContext`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) TransferFunds(ctx context.Context, key string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		tx, err := s.Pool.Begin(ctx) // want `Begin on \*pgxpool.Pool`
		if err != nil {
			return idem.Result{}, err
		}
		tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1")
		return idem.Result{}, tx.Commit(ctx)
	})
	return err
}

func (s *Service) bumpCounter(ctx context.Context) error {
	_, err := s.DB.ExecContext(ctx, "UPDATE counters SET n = n + 1") // want `in bumpCounter, called from`
	return err
}

func (s *Service) CountVisit(ctx context.Context, key string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		return idem.Result{}, s.bumpCounter(ctx)
	})
	return err
}

func (s *Service) CloseTicket() http.Handler {
	return s.MW.Route(idemhttp.RouteOptions{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.DB.ExecContext(r.Context(), "UPDATE tickets SET closed = 1 WHERE id = ?", r.URL.Query().Get("id")) // want `ExecContext`
	}))
}

// Near misses.

func (s *Service) CreateOrderTx(ctx context.Context, key string, o Order) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqlitestore.TxFrom(ctx)
		_, err := tx.ExecContext(ctx, insertOrder, o.ID, o.Total)
		return idem.Result{}, err
	})
	return err
}

func (s *Service) ReserveStockTx(ctx context.Context, key, sku string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := pgstore.TxFrom(ctx)
		_, err := tx.Exec(ctx, "UPDATE stock SET reserved = reserved + 1 WHERE sku = $1", sku)
		return idem.Result{}, err
	})
	return err
}

func (s *Service) PriceOrder(ctx context.Context, key, sku string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		var price int
		if err := s.DB.QueryRowContext(ctx, "SELECT price FROM items WHERE sku = ?", sku).Scan(&price); err != nil {
			return idem.Result{}, err
		}
		tx, _ := sqlitestore.TxFrom(ctx)
		_, err := tx.ExecContext(ctx, insertOrder, sku, price)
		return idem.Result{}, err
	})
	return err
}

func (s *Service) ListOrders(ctx context.Context, key, q string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		rows, err := s.Pool.Query(ctx, q)
		if err != nil {
			return idem.Result{}, err
		}
		rows.Close()
		return idem.Result{}, nil
	})
	return err
}

func (s *Service) Seed(ctx context.Context) error { // nearmiss
	_, err := s.DB.ExecContext(ctx, "INSERT INTO orders(id, total) VALUES ('seed', 0)")
	return err
}

func (s *Service) Migrate(ctx context.Context) error { // nearmiss
	_, err := s.Pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS orders (id text primary key)")
	return err
}

func (s *Service) AuditAttempt(ctx context.Context, key string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		//idemvet:ignore the attempt log is kept even when the work rolls back
		_, err := s.DB.ExecContext(ctx, "INSERT INTO attempts(key) VALUES (?)", key)
		return idem.Result{}, err
	})
	return err
}

func (s *Service) LeasedRoute() http.Handler { // nearmiss
	return s.MW.Route(idemhttp.RouteOptions{Leased: true, Kind: "export"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.DB.ExecContext(r.Context(), "INSERT INTO exports VALUES (1)")
	}))
}

func (s *Service) CheckHealth(ctx context.Context, key string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		var one int
		err := s.DB.QueryRowContext(ctx, "/* health */ SELECT 1").Scan(&one)
		return idem.Result{}, err
	})
	return err
}

func (s *Service) UnguardedHandler() http.Handler { // nearmiss
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.DB.ExecContext(r.Context(), "INSERT INTO hits VALUES (1)")
	})
}

func (s *Service) HandleShipmentTx(ctx context.Context, m *inbox.Message) error { // nearmiss
	tx, _ := pgstore.TxFrom(ctx)
	_, err := tx.Exec(ctx, "INSERT INTO shipments(msg) VALUES ($1)", m.ID)
	return err
}

func (s *Service) ConsumeShipmentsTx(ctx context.Context, m *inbox.Message) { // nearmiss
	s.Inbox.Process(ctx, m, s.HandleShipmentTx)
}

func (s *Service) GenericTx(ctx context.Context, key string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := idem.TxFrom(ctx)
		_ = tx.Handle()
		return idem.Result{}, nil
	})
	return err
}

func (s *Service) TransferNamedWork(ctx context.Context, key string) error {
	transfer := func(ctx context.Context) (idem.Result, error) {
		_, err := s.DB.ExecContext(ctx, "UPDATE accounts SET balance = balance - 1") // want `ExecContext`
		return idem.Result{}, err
	}
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, transfer)
	return err
}

func (s *Service) TransferNamedWorkTx(ctx context.Context, key string) error { // nearmiss
	transfer := func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqlitestore.TxFrom(ctx)
		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 1")
		return idem.Result{}, err
	}
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, transfer)
	return err
}
