package check

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Status is a rule's verdict.
type Status string

// The verdicts. A FAIL breaks the contract; a WARN is a weakness or a
// doubt the evidence could not settle; a SKIP is a rule that could not run
// (its reason says why).
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Warn Status = "WARN"
	Skip Status = "SKIP"
)

// Exchange is one request sent and the answer it got, as evidence.
type Exchange struct {
	// Label names the request within its rule ("first", "retry", "#3").
	Label string `json:"label"`
	// Key is the key header's value as sent, empty for none; a malformed
	// key is described rather than copied.
	Key string `json:"key,omitempty"`
	// Status is the answer's status code, 0 when there was no answer.
	Status int `json:"status,omitempty"`
	// Digest is the first 12 hex digits of the SHA-256 of the body.
	Digest string `json:"digest,omitempty"`
	// Bytes is the body's length.
	Bytes int `json:"bytes"`
	// Replayed, RetryAfter and Location are those headers of the answer.
	Replayed   string `json:"replayed,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
	Location   string `json:"location,omitempty"`
	// Start is when the request was sent, from the start of the rule, and
	// Millis how long the answer took.
	Start  float64 `json:"start_ms"`
	Millis float64 `json:"ms"`
	// Error is why there was no answer.
	Error string `json:"error,omitempty"`

	sum    [sha256.Size]byte // of status, Location and body
	answer [sha256.Size]byte // of status and body: what a replay repeats byte for byte
	body   [sha256.Size]byte // of the body
	header http.Header       // the answer's headers, for replay fidelity
}

func newExchange(label, key string, res *Response, err error, start, took time.Duration) Exchange {
	x := Exchange{Label: label, Key: key, Start: ms(start), Millis: ms(took)}
	if err != nil {
		x.Error = err.Error()
		return x
	}
	body := sha256.Sum256(res.Body)
	x.Status = res.Status
	x.Digest = hex.EncodeToString(body[:])[:12]
	x.Bytes = len(res.Body)
	x.Replayed = res.Header.Get("Idempotent-Replayed")
	x.RetryAfter = res.Header.Get("Retry-After")
	x.Location = res.Header.Get("Location")
	x.header = res.Header.Clone()
	x.body = body
	h := sha256.New()
	fmt.Fprintf(h, "%d\n%s\n", res.Status, x.Location)
	h.Write(body[:])
	h.Sum(x.sum[:0])
	h.Reset()
	fmt.Fprintf(h, "%d\n", res.Status)
	h.Write(body[:])
	h.Sum(x.answer[:0])
	return x
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ok reports whether the answer is a 2xx.
func (x Exchange) ok() bool { return x.Status >= 200 && x.Status < 300 }

// marked reports whether the answer says it is a replay.
func (x Exchange) marked() bool { return strings.EqualFold(x.Replayed, "true") }

// same reports whether two answers are the same response: status,
// Location and body.
func (x Exchange) same(y Exchange) bool { return x.Error == "" && y.Error == "" && x.sum == y.sum }

// sameAnswer reports whether two answers have the same status and body,
// byte for byte, whatever their headers.
func (x Exchange) sameAnswer(y Exchange) bool {
	return x.Error == "" && y.Error == "" && x.answer == y.answer
}

// String is the exchange as one line of evidence.
func (x Exchange) String() string {
	var b strings.Builder
	b.WriteString(x.Label)
	b.WriteString(": ")
	if x.Error != "" {
		fmt.Fprintf(&b, "no answer (%s) after %.0f ms", x.Error, x.Millis)
		return b.String()
	}
	fmt.Fprintf(&b, "%d %s, %d bytes, sha256 %s", x.Status, http.StatusText(x.Status), x.Bytes, x.Digest)
	if x.Location != "" {
		fmt.Fprintf(&b, ", Location: %s", x.Location)
	}
	if x.Replayed != "" {
		fmt.Fprintf(&b, ", Idempotent-Replayed: %s", x.Replayed)
	}
	if x.RetryAfter != "" {
		fmt.Fprintf(&b, ", Retry-After: %s", x.RetryAfter)
	}
	fmt.Fprintf(&b, ", %.0f ms", x.Millis)
	return b.String()
}

// Result is one rule's verdict and its evidence.
type Result struct {
	// Rule is the rule's number, 1 to 8, and Name its stable name.
	Rule int    `json:"rule"`
	Name string `json:"name"`
	// Title says what the rule sends.
	Title  string `json:"title"`
	Status Status `json:"status"`
	// Reason is the verdict in one sentence.
	Reason string `json:"reason"`
	// Evidence is the lines that support it: answers, effects, timings.
	Evidence []string `json:"evidence,omitempty"`
	// EffectsBefore and EffectsAfter are the effects counter's values
	// around the rule, when there is a counter.
	EffectsBefore *int64 `json:"effects_before,omitempty"`
	EffectsAfter  *int64 `json:"effects_after,omitempty"`
	// Duplicated is rule 8's finding: whether two requests without a key
	// both ran. Nil when it could not be told.
	Duplicated *bool `json:"duplicated,omitempty"`
	// Exchanges is every request the rule sent.
	Exchanges []Exchange `json:"exchanges,omitempty"`
	// Millis is how long the rule took.
	Millis float64 `json:"ms"`
}

func (r *Result) set(s Status, format string, args ...any) {
	r.Status = s
	r.Reason = fmt.Sprintf(format, args...)
}

func (r *Result) note(format string, args ...any) {
	r.Evidence = append(r.Evidence, fmt.Sprintf(format, args...))
}

// Report is the audit of one endpoint.
type Report struct {
	// Name is the endpoint's name in a plan, if any.
	Name      string `json:"name,omitempty"`
	Method    string `json:"method"`
	URL       string `json:"url"`
	KeyHeader string `json:"key_header"`
	// Effects says how executions were known: "counted by …", or
	// "inferred from the answers" with what the inference could use.
	Effects string `json:"effects"`
	// Counted is true when an effects counter was used.
	Counted bool `json:"counted"`
	// Probe is the requests sent before the rules: the check that the
	// endpoint accepts the request (and that the counter counts it), and,
	// without a counter, whether bodies tell executions apart.
	Probe []Exchange `json:"probe,omitempty"`
	// Results has one entry per rule, in order.
	Results []Result `json:"rules"`
	// EffectsCaused is how many effects the audit caused (counted, or
	// inferred when Counted is false). The audit undoes none of them.
	EffectsCaused int64 `json:"effects_caused"`
	// Error is why the audit stopped early, if it did; the rules it did
	// not run are SKIP.
	Error string `json:"error,omitempty"`
	// Pass, Fail, Warn and Skip count the verdicts.
	Pass int `json:"pass"`
	Fail int `json:"fail"`
	Warn int `json:"warn"`
	Skip int `json:"skip"`
	// Millis is how long the audit took.
	Millis float64 `json:"ms"`
}

// Failed reports whether a rule failed or the audit stopped early.
func (r *Report) Failed() bool { return r.Fail > 0 || r.Error != "" }

// Summary is the report in one line.
func (r *Report) Summary() string {
	how := "counted"
	if !r.Counted {
		how = "inferred"
	}
	s := fmt.Sprintf("%d rules: %d PASS, %d FAIL, %d WARN, %d SKIP; effects caused: %d (%s)",
		len(r.Results), r.Pass, r.Fail, r.Warn, r.Skip, r.EffectsCaused, how)
	if r.Error != "" {
		s += "; stopped: " + r.Error
	}
	return s
}

// Status returns the verdict of rule n (1 to 8), or "" if there is none.
func (r *Report) Status(n int) Status {
	for _, res := range r.Results {
		if res.Rule == n {
			return res.Status
		}
	}
	return ""
}

// Statuses returns every rule's verdict by number.
func (r *Report) Statuses() map[int]Status {
	m := make(map[int]Status, len(r.Results))
	for _, res := range r.Results {
		m[res.Rule] = res.Status
	}
	return m
}

func (r *Report) tally() {
	r.Pass, r.Fail, r.Warn, r.Skip = 0, 0, 0, 0
	for _, res := range r.Results {
		switch res.Status {
		case Pass:
			r.Pass++
		case Fail:
			r.Fail++
		case Warn:
			r.Warn++
		case Skip:
			r.Skip++
		}
	}
}
