package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Problem type URIs (RFC 9457) of the answers the middleware gives itself.
// They are stable: clients may branch on them.
const (
	ProblemMissingKey       = "https://idemkit.dev/problems/missing-key"
	ProblemInvalidKey       = "https://idemkit.dev/problems/invalid-key"
	ProblemInFlight         = "https://idemkit.dev/problems/in-flight"
	ProblemMismatch         = "https://idemkit.dev/problems/key-reused"
	ProblemUnavailable      = "https://idemkit.dev/problems/store-unavailable"
	ProblemRequestTooLarge  = "https://idemkit.dev/problems/request-too-large"
	ProblemResponseTooLarge = "https://idemkit.dev/problems/response-too-large"
	ProblemBadRequest       = "https://idemkit.dev/problems/unreadable-request"
	ProblemInternal         = "https://idemkit.dev/problems/internal"
	ProblemNoPrincipal      = "https://idemkit.dev/problems/no-principal"
	ProblemRequestTimeout   = "https://idemkit.dev/problems/request-timeout"
	ProblemTooBusy          = "https://idemkit.dev/problems/too-busy"
	ProblemLeaseLost        = "https://idemkit.dev/problems/lease-lost"
	ProblemConflictingKeys  = "https://idemkit.dev/problems/conflicting-keys"
)

// ProblemContentType is the media type of the middleware's own error
// responses.
const ProblemContentType = "application/problem+json"

// Problem is the body of the middleware's own error responses, an RFC 9457
// problem details object.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance identifies this occurrence of the problem, when the
	// server gives one. The middleware never sets it.
	Instance string `json:"instance,omitempty"`
}

var problemTitles = map[string]string{
	ProblemMissingKey:       "Idempotency-Key is missing",
	ProblemInvalidKey:       "Idempotency-Key is invalid",
	ProblemInFlight:         "A request with this Idempotency-Key is in progress",
	ProblemMismatch:         "Idempotency-Key was used with a different request",
	ProblemUnavailable:      "Idempotency store is unavailable",
	ProblemRequestTooLarge:  "Request body is too large",
	ProblemResponseTooLarge: "Response is too large to record",
	ProblemBadRequest:       "Request body could not be read",
	ProblemInternal:         "Internal error",
	ProblemNoPrincipal:      "The request has no principal to scope its key by",
	ProblemRequestTimeout:   "Request was not received in time",
	ProblemTooBusy:          "Too many requests in progress",
	ProblemLeaseLost:        "The claim on this Idempotency-Key was lost",
	ProblemConflictingKeys:  "The request carries two different idempotency keys",
}

// writeProblem sends a problem+json answer. retryAfter, when positive, is
// sent as Retry-After in whole seconds, rounded up.
func writeProblem(w http.ResponseWriter, typ string, status int, detail string, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(retryAfter), 10))
	}
	body, _ := json.Marshal(Problem{Type: typ, Title: problemTitles[typ], Status: status, Detail: detail})
	body = append(body, '\n')
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
