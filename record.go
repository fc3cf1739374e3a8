package idem

import "time"

// State is the state of a stored record.
type State string

// Record states. Atomic-mode stores only ever hold completed records: the
// claim of a key in progress is a lock that belongs to the transaction and is
// never committed. StatePending is leased mode's: a claim committed with a
// lease before the work runs (see LeasedStore).
const (
	StateCompleted State = "completed"
	StatePending   State = "pending"
)

// Result is what the work produced and what a retry receives. For HTTP it is
// the response's status, recorded headers and body; other callers may use
// Body alone as opaque bytes.
type Result struct {
	// Status is an HTTP status or an application code; zero if unused. It
	// must fit in 32 bits.
	Status int

	// Header holds the recorded response headers, if any. Guard records
	// them as every store can keep them: it drops an entry whose name is
	// not valid UTF-8 or has a control character (net/http never sends
	// one), turns NUL, CR and LF in values into spaces (as RFC 9110,
	// section 5.5, allows; net/http does so to CR and LF on the wire), and
	// bytes that are not valid UTF-8 into U+FFFD. Guard.Do returns the
	// result as recorded, so a caller can send the first answer exactly as
	// its replays will be (idemhttp does).
	Header map[string][]string

	// Body is the recorded response body or opaque result bytes.
	Body []byte
}

// Record is one stored idempotency record, addressed by (Scope, Key).
type Record struct {
	// Scope is the stored form of the request's scope (see StoredScope).
	Scope string
	// Key is the client's idempotency key.
	Key string
	// Fingerprint is the stored form of the request's fingerprint (see
	// Request.Fingerprint).
	Fingerprint string
	State       State
	Result      Result
	CreatedAt   time.Time
	// ExpiresAt is when a completed record expires. Leased stores write a
	// pending record with ExpiresAt = PendingExpiresAt, so that atomic-mode
	// paths (Begin, the sweeper) treat it as live.
	ExpiresAt time.Time

	// The fields below are those of leased mode (see LeasedStore); they
	// are zero in atomic stores.

	// Token is the fencing token of the current holder of a pending
	// record: it grows at every claim, so a writer holding an older token
	// is refused.
	Token int64
	// LeaseUntil is when the current lease of a pending record ends; from
	// then on the record may be claimed again.
	LeaseUntil time.Time
	// Kind names the registered work that a completer runs to finish the
	// record, and Input is what that work needs (opaque bytes).
	Kind  string
	Input []byte
	// TTL is how long the record is kept once completed, as the call that
	// first claimed it asked (ClaimParams.TTL): whoever completes it (that
	// call, a takeover by a retry, a Completer) keeps it that long. Zero
	// means unknown (a record claimed before stores kept it): the engine
	// that completes it uses its own default.
	TTL time.Duration
	// Attempts counts the claims of the record, the first included.
	Attempts int
	// LastError is the error of the last attempt that released the record
	// without completing it, if any.
	LastError string
}

// PendingExpiresAt is the ExpiresAt that leased stores keep on a pending
// record: a pending record never expires (it is completed, or reported). It
// is far enough to be never reached and near enough to fit in the int64
// nanoseconds some stores keep.
var PendingExpiresAt = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// Expired reports whether the record has expired at now. A completed record
// expires at ExpiresAt: from that instant on it behaves as if it did not
// exist. A pending record never expires.
func (r *Record) Expired(now time.Time) bool {
	return r.State != StatePending && !now.Before(r.ExpiresAt)
}
