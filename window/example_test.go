package window_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem/window"
)

// A consumer runs each delivery through Do, and acknowledges the message
// when the outcome is settled; otherwise it has it delivered again.
func ExampleDo() {
	w, err := window.NewMemory(&window.MemoryConfig{Lease: 30 * time.Second, Window: 10 * time.Minute})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	balance := 0
	credit := func(fail bool) func(context.Context) error {
		return func(context.Context) error {
			if fail {
				return errors.New("ledger unavailable")
			}
			balance += 100
			return nil
		}
	}
	// The first delivery fails, the broker redelivers it, then delivers
	// it once more (the consumer crashed before its ack, say).
	for _, fail := range []bool{true, false, false} {
		o, err := window.Do(ctx, w, "msg-42", credit(fail))
		fmt.Printf("%s (ack: %v, err: %v)\n", o, o.Settled(), err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// retry (ack: false, err: ledger unavailable)
	// applied (ack: true, err: <nil>)
	// duplicate (ack: true, err: <nil>)
	// balance: 100
}

// The two phases by hand, for a batch of messages: reserve them all, run
// the reserved ones, confirm those that succeeded and release the others.
func ExampleReserveAll() {
	w, err := window.NewMemory(nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	rs, err := window.ReserveAll(ctx, w, []string{"a", "b", "a"})
	if err != nil {
		panic(err) // deliver the whole batch again later
	}
	var ok, failed []window.Reservation
	for _, r := range rs {
		fmt.Println(r.ID, r.Status)
		switch {
		case r.Status != window.Reserved:
			// Done: ack it. InProgress: deliver it again later.
		case r.ID == "b":
			failed = append(failed, r) // its handler failed
		default:
			ok = append(ok, r)
		}
	}
	fmt.Println(window.ConfirmAll(ctx, w, ok), window.ReleaseAll(ctx, w, failed))
	rs, _ = window.ReserveAll(ctx, w, []string{"a", "b"})
	fmt.Println(rs[0].Status, rs[1].Status)
	// Output:
	// a reserved
	// b reserved
	// a in progress
	// <nil> <nil>
	// done reserved
}
