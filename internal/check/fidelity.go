package check

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Replay fidelity is judged apart from duplicate safety: an answer that
// repeats the original status and body but not one of its headers is a
// replay with a defect of fidelity (WARN), not a second execution.

// unreplayed are the headers that describe the answer's transmission or
// the request it answered rather than the recorded response, so a replay
// need not repeat them: they are left out of the comparison.
var unreplayed = map[string]bool{
	"Age":                 true,
	"Connection":          true,
	"Content-Length":      true, // the body is compared byte for byte
	"Date":                true,
	"Idempotent-Replayed": true, // the replay's own mark
	"Keep-Alive":          true,
	"Proxy-Connection":    true,
	"Request-Id":          true,
	"Retry-After":         true,
	"Server-Timing":       true,
	"Set-Cookie":          true,
	"Traceparent":         true,
	"Tracestate":          true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"X-Request-Id":        true,
}

// headerDiff says, header by header, how answer b's headers differ from
// answer a's (the original): `Location "/p/1", then absent`. Headers in
// unreplayed are not compared.
func headerDiff(a, b Exchange) []string {
	names := map[string]bool{}
	for n := range a.header {
		names[http.CanonicalHeaderKey(n)] = true
	}
	for n := range b.header {
		names[http.CanonicalHeaderKey(n)] = true
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		if unreplayed[n] {
			continue
		}
		av, aok := headerValue(a.header, n)
		bv, bok := headerValue(b.header, n)
		if av == bv && aok == bok {
			continue
		}
		out = append(out, fmt.Sprintf("header %s %s, then %s", n, shown(av, aok), shown(bv, bok)))
	}
	return out
}

func headerValue(h http.Header, name string) (string, bool) {
	v, ok := h[name]
	return strings.Join(v, ", "), ok
}

func shown(v string, present bool) string {
	if !present {
		return "absent"
	}
	if len(v) > 80 {
		v = v[:80] + "…"
	}
	return fmt.Sprintf("%q", v)
}

// answerDiff says how answer b's status and body differ from answer a's:
// "status 201, then 409", "body sha256 … (86 bytes), then … (90 bytes)".
// It is empty when both are the same, byte for byte.
func answerDiff(a, b Exchange) []string {
	var out []string
	if a.Status != b.Status {
		out = append(out, fmt.Sprintf("status %d, then %d", a.Status, b.Status))
	}
	if a.body != b.body {
		out = append(out, fmt.Sprintf("body sha256 %s (%d bytes), then %s (%d bytes)", a.Digest, a.Bytes, b.Digest, b.Bytes))
	}
	return out
}

// diff is answerDiff and headerDiff together, as one phrase; "nothing"
// when the answers are the same.
func diff(a, b Exchange) string {
	d := append(answerDiff(a, b), headerDiff(a, b)...)
	if len(d) == 0 {
		return "nothing"
	}
	return strings.Join(d, "; ")
}
