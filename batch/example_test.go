package batch_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/memstore"
)

// A batch of payments run twice: the second run replays every item, the
// refusal included, and applies nothing.
func Example() {
	ctx := context.Background()
	store := memstore.New()
	guard, _ := idem.New(store, nil)

	amounts := map[string]int{"p1": 10, "p2": 25, "p3": -4}
	var items []batch.Item[int]
	for _, id := range []string{"p1", "p2", "p3"} {
		items = append(items, batch.Item[int]{ID: id, Body: []byte(strconv.Itoa(amounts[id])), Value: amounts[id]})
	}
	pay := func(ctx context.Context, it batch.Item[int]) (idem.Result, error) {
		if it.Value <= 0 {
			return idem.Result{}, batch.Refuse(errors.New("amount must be positive"))
		}
		tx, _ := memstore.TxFrom(ctx) // the item's transaction
		tx.Set("paid/"+it.ID, strconv.Itoa(it.Value))
		return idem.Result{Status: 201}, nil
	}
	for run := 1; run <= 2; run++ {
		rep, err := batch.Run(ctx, guard, &batch.Config{BatchID: "2026-05", Scope: "payments"}, items, pay)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("run %d: applied %d, replayed %d, refused %d\n", run, rep.Applied, rep.Replayed, rep.Refused)
		for _, ir := range rep.Items {
			if ir.Outcome == batch.Refused {
				fmt.Printf("  %s refused: %s (recorded earlier: %t)\n", ir.ID, ir.Reason, ir.Replayed)
			}
		}
	}
	fmt.Println("key of p1:", batch.Key("2026-05", "p1"))
	// Output:
	// run 1: applied 2, replayed 0, refused 1
	//   p3 refused: amount must be positive (recorded earlier: false)
	// run 2: applied 0, replayed 2, refused 1
	//   p3 refused: amount must be positive (recorded earlier: true)
	// key of p1: 7/2026-05/p1
}
