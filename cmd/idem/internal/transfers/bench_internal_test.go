package transfers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// BenchmarkInboxRatio applies transfer commands with the inbox
// (inbox.Process with ApplyMessage: the transfer and the message id in one
// transaction) and without it (the same handler in a plain transaction of
// the same store), alternating in rounds (plain, inbox, inbox, plain, …)
// so that the machine's noise and the tables' growth hit both alike, and
// reports the throughput ratio inbox/plain. b.N is the number of rounds;
// each round applies 100 commands per variant, each a new message id,
// between random pairs of 64 accounts. Run it with a small -benchtime
// (for example 10x).
func BenchmarkInboxRatio(b *testing.B) {
	for _, backend := range []struct {
		name string
		open func(b *testing.B) (idem.Store, *Database)
	}{
		{"SQLite", func(b *testing.B) (idem.Store, *Database) {
			s, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s, SQLite(s)
		}},
		{"Postgres", func(b *testing.B) (idem.Store, *Database) {
			_, dsn := pgtest.Schema(b)
			s, err := pgstore.Open(context.Background(), dsn+"&pool_max_conns=16", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s, Postgres(s)
		}},
	} {
		for _, conc := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/conc=%d", backend.name, conc), func(b *testing.B) {
				store, db := backend.open(b)
				benchInboxRatio(b, store, db, conc)
			})
		}
	}
}

func benchInboxRatio(b *testing.B, store idem.Store, db *Database, conc int) {
	const perRound, accounts = 100, 64
	ctx := context.Background()
	s, err := New(ctx, db, &Config{RequestTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for i := range accounts {
		if _, err := db.pool.exec(ctx, `INSERT INTO accounts (id, balance) VALUES ($1, $2)`, fmt.Sprint("acct-", i), int64(1)<<50); err != nil {
			b.Fatal(err)
		}
	}
	ib, err := inbox.New(store, &inbox.Config{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	message := func(rng *rand.Rand) *inbox.Message {
		from := rng.IntN(accounts)
		to := (from + 1 + rng.IntN(accounts-1)) % accounts
		body := fmt.Sprintf(`{"from":"acct-%d","to":"acct-%d","amount":1}`, from, to)
		return &inbox.Message{ID: fmt.Sprint("msg-", seq.Add(1)), Body: []byte(body), Attempt: 1}
	}
	withInbox := func(m *inbox.Message) error {
		o, err := ib.Process(ctx, m, s.ApplyMessage)
		if o != inbox.Applied {
			return fmt.Errorf("inbox: %s %v", o, err)
		}
		return nil
	}
	plain := func(m *inbox.Message) error {
		tx, err := db.begin(ctx)
		if err != nil {
			return err
		}
		if err := s.applyMessage(ctx, tx, m); err != nil {
			_ = tx.rollback(ctx)
			return err
		}
		return tx.commit(ctx)
	}
	round := func(apply func(*inbox.Message) error) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := range conc {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(seq.Load())))
				for next.Add(1) <= perRound {
					if err := apply(message(rng)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	benchpair.Ratio(b, perRound, "msgs",
		benchpair.Variant{Name: "plain", Round: func() time.Duration { return round(plain) }},
		benchpair.Variant{Name: "inbox", Round: func() time.Duration { return round(withInbox) }})
}
