package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/memstore"
)

// A consumer applies each message once: the redelivery is acknowledged
// without running the handler, and a message the business rules refuse is
// settled, not retried.
func Example() {
	store := memstore.New() // pgstore or sqlitestore in production
	ib, err := inbox.New(store, &inbox.Config{Name: "payments"})
	if err != nil {
		panic(err)
	}
	credit := func(ctx context.Context, m *inbox.Message) error {
		amount, err := strconv.Atoi(string(m.Body))
		if err != nil || amount <= 0 {
			return inbox.Refuse(errors.New("amount must be a positive integer"))
		}
		tx, _ := memstore.TxFrom(ctx) // the inbox's transaction: pgstore.TxFrom with PostgreSQL
		balance, _ := tx.Get("balance")
		n, _ := strconv.Atoi(balance)
		tx.Set("balance", strconv.Itoa(n+amount))
		return nil
	}
	for _, m := range []*inbox.Message{
		{ID: "pay-1", Body: []byte("100"), Attempt: 1},
		{ID: "pay-1", Body: []byte("100"), Attempt: 2}, // redelivered: the ack was lost
		{ID: "pay-2", Body: []byte("-5"), Attempt: 1},
		{ID: "pay-2", Body: []byte("-5"), Attempt: 2},
	} {
		outcome, err := ib.Process(context.Background(), m, credit)
		fmt.Printf("%s attempt %d: %s (ack: %v) %v\n", m.ID, m.Attempt, outcome, outcome.Settled(), err)
	}
	balance, _ := store.Value("balance")
	fmt.Println("balance:", balance)
	// Output:
	// pay-1 attempt 1: applied (ack: true) <nil>
	// pay-1 attempt 2: duplicate (ack: true) <nil>
	// pay-2 attempt 1: refused (ack: true) inbox: message refused: amount must be a positive integer
	// pay-2 attempt 2: duplicate (ack: true) <nil>
	// balance: 100
}
