// Package batch runs a batch of items over an idem.Guard so that the batch
// can be run again, after a crash or a kill at any point, and each item
// still takes effect once (docs/DESIGN.md#b1).
//
// Each item has its own idempotency key, derived from the batch id and the
// item's own id (Key), and runs in its own transaction of the guard's
// store: the item's effect commits with its record (atomic mode), or not
// at all. Running the same batch again replays what already ran, runs what
// never committed, and reports which was which:
//
//	items := []batch.Item[Payment]{{ID: "row-1", Body: raw1, Value: p1}, …}
//	rep, err := batch.Run(ctx, guard, &batch.Config{BatchID: "2026-05-payroll", Scope: "payroll"}, items,
//		func(ctx context.Context, it batch.Item[Payment]) (idem.Result, error) {
//			tx, _ := sqlitestore.TxFrom(ctx) // the item's transaction
//			if !enoughFunds(ctx, tx, it.Value) {
//				return idem.Result{}, batch.Refuse(errors.New("insufficient funds")) // recorded: a re-run replays it
//			}
//			return idem.Result{Status: 201}, pay(ctx, tx, it.Value)
//		})
//
// # Outcomes
//
// Every item ends in one of four outcomes (ItemReport.Outcome):
//
//   - Applied: the item's work ran now and committed with its record.
//   - Replayed: an earlier run applied it; nothing ran now.
//   - Refused: the item can never succeed as it is. Either its work
//     refused it (Refuse, or a Result with a status of 400 or more), a
//     final answer recorded like an application, so that a re-run replays
//     the refusal (ItemReport.Replayed tells); or its id was used before,
//     in this batch, with other content (Body): a mismatch, which runs
//     nothing (the error matches idem.ErrMismatch).
//   - Failed: nothing was recorded (the store failed, the work returned an
//     error, the item was still in flight elsewhere past
//     Config.InFlightWait, or the run was cancelled before the item ran).
//     A failure is retryable: run the batch again.
//
// # Re-running
//
// A re-run must give the same batch id and, for each item, the same id and
// Body; then nothing runs twice. A changed Body under an id that already
// ran is refused as a mismatch, never applied: to change an item, give it a
// new id. Records expire with the guard's TTL (or Config.TTL): a re-run
// after its records expired runs its items again, so keep records at least
// as long as a batch may be run again.
//
// Items run in order, Config.Concurrency at a time, each in its own
// transaction: a batch is not all or nothing, and is not meant to be. What
// must be all or nothing, such as the validity of an input file, is checked
// before Run (see docs/BATCHES.md).
package batch
