// Package outboxtest is the conformance suite of the outbox contract
// (docs/OUTBOX.md): every store with an outbox (pgstore, pgstore/sqldb,
// sqlitestore) runs it from its tests, as storetest is run:
//
//	func TestOutboxConformance(t *testing.T) {
//		outboxtest.Run(t, &outboxtest.Harness{Open: func(t testing.TB) (idem.Store, outbox.Source) { … }})
//	}
//
// The suite stages messages through idem.Guard.Do (and Run.LocalStep
// where the store has leased mode), relays them with outbox.Relay to a
// Broker of its own, a Publisher that records what it confirmed, and
// checks what reached it: committed messages once each with their stable
// id, rolled-back and uncommitted ones never, nothing marked before its
// confirm, nothing lost by a relay that dies mid-claim, refusals parked,
// sent messages swept, order per partition key.
package outboxtest
