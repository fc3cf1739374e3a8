package history

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Outcome is what the client learnt of one attempt.
type Outcome int

const (
	// Unknown: no final answer (a transport error, a timeout, a reset, a
	// 5xx, a 408, 425, 429 or 499). The attempt may or may not have taken
	// effect, and may still hold the key at the server after the client
	// gave up.
	Unknown Outcome = iota
	// Completed: a final answer, a first execution or a replay
	// (Answer.Replayed), whose status and body are the key's result.
	Completed
	// InFlight: the server refused the attempt because another attempt
	// of the key held it (409).
	InFlight
)

func (o Outcome) String() string {
	switch o {
	case Completed:
		return "completed"
	case InFlight:
		return "in-flight"
	default:
		return "unknown"
	}
}

// Answer is what an attempt returned to its client.
type Answer struct {
	Outcome Outcome
	// Status and Digest (see Digest) are the result of a Completed
	// answer; Status is kept for the other outcomes when there was one.
	Status int
	Digest string
	// Replayed is whether the server marked a Completed answer a replay
	// (Idempotent-Replayed: true); false is a first execution.
	Replayed bool
	// Err describes an Unknown answer (the transport's error).
	Err string
}

// Op is one attempt of one key.
type Op struct {
	Key        string
	Client     int // the client that sent it (for the visualization); 0 if not known
	Start, End time.Time
	Answer
}

// Digest is the digest of a result's body that two answers of one key are
// compared by: SHA-256, hex.
func Digest(body []byte) string {
	d := sha256.Sum256(body)
	return hex.EncodeToString(d[:])
}

// FromHTTP classifies an HTTP answer (status, Idempotent-Replayed header,
// body) or a transport error: 409 is InFlight; an error, 408, 425, 429,
// 499 and 5xx are Unknown (docs/DESIGN.md: such answers are never
// recorded, and a 5xx written by a proxy says nothing of the server);
// every other status is a Completed result.
func FromHTTP(status int, replayed bool, body []byte, err error) Answer {
	if err != nil {
		return Answer{Outcome: Unknown, Status: status, Err: err.Error()}
	}
	switch {
	case status == 409:
		return Answer{Outcome: InFlight, Status: status}
	case status == 408, status == 425, status == 429, status == 499, status >= 500:
		return Answer{Outcome: Unknown, Status: status, Err: fmt.Sprintf("status %d", status)}
	}
	return Answer{Outcome: Completed, Status: status, Digest: Digest(body), Replayed: replayed}
}

func (a Answer) String() string {
	switch a.Outcome {
	case Completed:
		kind := "first"
		if a.Replayed {
			kind = "replay"
		}
		return fmt.Sprintf("%d %s %.8s", a.Status, kind, a.Digest)
	case InFlight:
		return "409 in flight"
	default:
		if a.Err != "" {
			return "unknown: " + a.Err
		}
		return "unknown"
	}
}
