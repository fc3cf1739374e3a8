// Package window is windowed dedup for message consumers: it remembers the
// ids of processed messages for a while (the window), so that a redelivery
// within it is dropped, without a database transaction per message.
//
// It is weaker than the transactional inbox (package inbox), and cheaper:
// the id is not recorded atomically with the handler's effect, and it is
// forgotten after the window. Use it where a rare duplicate is tolerable
// or harmless and a persisted id per message costs too much; use the inbox
// where each effect must happen once. docs/DEDUP.md says exactly what it
// guarantees and what it does not.
//
// # Two phases
//
// A Window is used in two phases, so that a message whose handler fails is
// processed on redelivery rather than dropped:
//
//  1. Reserve takes the id for a short lease while the handler runs;
//  2. Confirm, once the handler has succeeded, keeps the id for the window;
//     Release, if it failed, frees the id at once.
//
// Do runs a handler under both phases and says what to do with the
// message; use it rather than the phases by hand. The Window interface
// documents the contract, and package windowtest checks it.
//
// # Implementations
//
// Memory keeps ids in the process: sharded, expired in deadline order, and
// bounded by a maximum number of ids (Reserve fails with ErrFull rather
// than forget a live id). Package rediswindow keeps them in Redis, shared
// by every consumer process, with a pipelined batch form.
package window
