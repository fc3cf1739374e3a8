package idemwebhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Verifier checks that a delivery was signed by its provider and names it.
// Implementations must compare signatures in constant time (hmac.Equal)
// and accept a signature made with any of their secrets, so that a secret
// can be rotated without refusing deliveries in between.
type Verifier interface {
	// Provider names the scheme's provider, for the scope
	// ("webhook/<provider>/<endpoint>"), the logs and the metrics. It
	// must be a short constant such as "stripe".
	Provider() string

	// Verify checks the signature of a delivery whose headers are h and
	// whose whole body is body, and returns its delivery id and, when the
	// scheme signs one, its timestamp (the middleware checks it against
	// Config.Tolerance). A refusal is a *RejectError; any other error is
	// taken for ReasonBadSignature. Verify must not keep body.
	Verify(h http.Header, body []byte) (Delivery, error)
}

// Delivery is what a Verifier learned from a delivery it accepted.
type Delivery struct {
	// ID is the provider's id of the delivery: the same on every retry of
	// one event, and the key under which it is recorded.
	ID string
	// Timestamp is when the provider signed it, or zero when the scheme
	// signs no time.
	Timestamp time.Time
}

// Reason says why a delivery was refused. Its values are stable: they are
// used as metric labels.
type Reason string

// Reasons of a refusal, with the status each one is answered with.
const (
	// ReasonMethod: not a POST (405).
	ReasonMethod Reason = "method"
	// ReasonTooLarge: the body is over Config.MaxBody (413).
	ReasonTooLarge Reason = "too_large"
	// ReasonUnreadable: the body could not be read (400).
	ReasonUnreadable Reason = "unreadable"
	// ReasonMissingSignature: a header the scheme needs is missing (401).
	ReasonMissingSignature Reason = "missing_signature"
	// ReasonMalformedSignature: a signature header cannot be parsed (401).
	ReasonMalformedSignature Reason = "malformed_signature"
	// ReasonBadSignature: no signature matches any secret (401).
	ReasonBadSignature Reason = "bad_signature"
	// ReasonStaleTimestamp: signed longer ago than Config.Tolerance (401).
	ReasonStaleTimestamp Reason = "stale_timestamp"
	// ReasonFutureTimestamp: signed further ahead than Config.Tolerance (401).
	ReasonFutureTimestamp Reason = "future_timestamp"
	// ReasonMissingID: a verified delivery carries no delivery id (400).
	ReasonMissingID Reason = "missing_id"
	// ReasonInvalidID: its id is not 1 to 255 visible ASCII characters
	// (400).
	ReasonInvalidID Reason = "invalid_id"
)

// Reasons returns every Reason, for observers that pre-create one series
// per reason.
func Reasons() []Reason {
	return []Reason{ReasonMethod, ReasonTooLarge, ReasonUnreadable, ReasonMissingSignature,
		ReasonMalformedSignature, ReasonBadSignature, ReasonStaleTimestamp, ReasonFutureTimestamp,
		ReasonMissingID, ReasonInvalidID}
}

// status is the HTTP status a refusal for r is answered with.
func (r Reason) status() int {
	switch r {
	case ReasonMethod:
		return http.StatusMethodNotAllowed
	case ReasonTooLarge:
		return http.StatusRequestEntityTooLarge
	case ReasonUnreadable, ReasonMissingID, ReasonInvalidID:
		return http.StatusBadRequest
	default:
		return http.StatusUnauthorized
	}
}

// RejectError is a Verifier's refusal of a delivery.
type RejectError struct {
	Reason Reason
	// Detail explains it to the provider's operator; it never quotes a
	// signature or a secret.
	Detail string
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("idemwebhook: %s: %s", e.Reason, e.Detail)
}

// Reject returns a *RejectError.
func Reject(reason Reason, detail string) error {
	return &RejectError{Reason: reason, Detail: detail}
}

// reasonOf returns the refusal err stands for.
func reasonOf(err error) *RejectError {
	var re *RejectError
	if errors.As(err, &re) {
		return re
	}
	return &RejectError{Reason: ReasonBadSignature, Detail: "the signature could not be verified"}
}

// errBadSignature is what every scheme answers when no signature matches:
// the same words whichever secret or signature came closest.
func errBadSignature() error {
	return Reject(ReasonBadSignature, "no signature matches a secret of this endpoint")
}

// hmacSHA256 returns the HMAC-SHA256 of the parts, concatenated, under key.
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// anyMatch reports, in constant time for each comparison, whether one of
// the candidates equals one of the expected MACs. Every pair is compared,
// so the time does not depend on which one matched.
func anyMatch(expected, candidates [][]byte) bool {
	ok := false
	for _, e := range expected {
		for _, c := range candidates {
			if hmac.Equal(e, c) {
				ok = true
			}
		}
	}
	return ok
}

// noSecrets is the error of a verifier built without a secret.
func noSecrets(scheme string) error {
	return fmt.Errorf("idemwebhook: %s: at least one secret is needed", scheme)
}
