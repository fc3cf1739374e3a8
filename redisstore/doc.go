// Package redisstore is a leased-mode store on Redis (an idem.LeasedStore),
// through github.com/redis/go-redis/v9: for services that call a provider
// and have no SQL database of their own. docs/REDIS.md is its guide: the
// keys, the pending index, what Redis can lose and the settings that narrow
// it, and Redis Cluster.
//
//	s, err := redisstore.Open(ctx, "redis://127.0.0.1:6379/0", nil)
//	leased, err := idem.NewLeased(s, nil)
//	res, replayed, err := leased.Do(ctx, idem.LeasedRequest{…}, work)
//
// New takes any go-redis client: a *redis.Client, a *redis.ClusterClient
// or a *redis.FailoverClient (Sentinel).
//
// # Leased mode only
//
// A Store is not an idem.Store (atomic mode) and not an
// idem.LeasedTxStore (Run.LocalStep): both commit the work's own writes in
// one transaction with the record, and those writes live in a SQL
// database, not in Redis. Run.LocalStep on this store fails; use Run.Step,
// whose effects live elsewhere (a provider called with Run.DerivedKey).
//
// # Atomicity
//
// Every operation on a record (Claim, Heartbeat, SaveStep, Complete,
// Release) is one Lua script on the record's keys, which share one hash
// slot: the check of the fencing token and the write are one atomic step
// of the server, and a stale holder's write is refused (idem.ErrFenced).
// Times come from the params, never from Redis's clock: a completed record
// is expired by a claim whose Now has reached its ExpiresAt, and Redis
// deletes it ExpiresAt - Now after Complete (at least
// Config.MinRetention), measured by Redis from the call.
//
// # Abandoned records
//
// Pending records are indexed in Config.PendingIndexes sorted sets, each in
// its own hash slot, which separate script runs keep: before a claim
// writes a new record it reserves the record's member in the index, so no
// pending record is ever missing from it; Abandoned checks every member
// against its record and repairs stale ones. If Redis loses the index and
// not the records (a node restarted without persistence), Reindex puts the
// pending records back.
//
// # Operators
//
// Store is an idem.Admin and an idem.Inspector, for idem keys, forget,
// pending and resolve: Forget and Resolve are one script each with their
// audit entry, List pages with SCAN (sorted by scope and key within a
// page, not across pages), and those calls need one server or a Sentinel
// master, not a Redis Cluster (docs/REDIS.md, "Operators").
//
// # Errors
//
// A failure to reach Redis, or a write that fewer replicas than
// Config.WaitReplicas acknowledged in time (ErrNotReplicated), matches
// idem.ErrUnavailable. go-redis retries some failures by itself; a
// Complete whose reply was lost and that it retries answers
// idem.ErrFenced although the record was completed: the client's next
// retry replays the result.
package redisstore
