package check

import (
	"net/http"
	"slices"
	"testing"
)

func exchange(status int, body string, h http.Header) Exchange {
	return newExchange("x", "", &Response{Status: status, Header: h, Body: []byte(body)}, nil, 0, 0)
}

// What differs between an original answer and a replay is named exactly:
// status, body, each header with both values; transmission headers and
// the replay mark are not compared.
func TestDiffs(t *testing.T) {
	t.Parallel()
	loc := http.Header{"Location": {"/p/1"}, "Content-Type": {"application/json"}, "Date": {"Mon"}}
	for _, tt := range []struct {
		name           string
		a, b           Exchange
		answer, header []string
	}{
		{"Same", exchange(201, "{}", loc), exchange(201, "{}", loc), nil, nil},
		{"HeaderDropped", exchange(201, "{}", loc), exchange(201, "{}", http.Header{"Content-Type": {"application/json"}}),
			nil, []string{`header Location "/p/1", then absent`}},
		{"HeaderAdded", exchange(201, "{}", nil), exchange(201, "{}", http.Header{"Etag": {`"v1"`}}),
			nil, []string{`header Etag absent, then "\"v1\""`}},
		{"Unreplayed", exchange(201, "{}", loc), exchange(201, "{}", http.Header{"Location": {"/p/1"}, "Content-Type": {"application/json"}, "Date": {"Tue"}, "Idempotent-Replayed": {"true"}, "Retry-After": {"1"}}),
			nil, nil},
		{"Status", exchange(201, "{}", nil), exchange(200, "{}", nil), []string{"status 201, then 200"}, nil},
		{"Body", exchange(201, "{}", nil), exchange(201, "[]", nil),
			[]string{"body sha256 44136fa355b3 (2 bytes), then 4f53cda18c2b (2 bytes)"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := answerDiff(tt.a, tt.b); !slices.Equal(got, tt.answer) {
				t.Errorf("answerDiff = %q, want %q", got, tt.answer)
			}
			if got := headerDiff(tt.a, tt.b); !slices.Equal(got, tt.header) {
				t.Errorf("headerDiff = %q, want %q", got, tt.header)
			}
			if same := len(tt.answer) == 0; tt.a.sameAnswer(tt.b) != same {
				t.Errorf("sameAnswer = %v, want %v", !same, same)
			}
		})
	}
}
