package transfers

import (
	"errors"
	"testing"
)

func TestChargeID(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"id":"ch_1","status":"ok"}`: "ch_1",
		`{"id":42}`:                   "42",
		`{"id":12345678901234567890}`: "12345678901234567890",
		`{"id":""}`:                   "",
		`{"id":null}`:                 "",
		`{"id":true}`:                 "",
		`{"id":{"a":1}}`:              "",
		`{"charge":"ch_1"}`:           "",
		`not json`:                    "",
	} {
		got, ok := chargeID([]byte(body))
		if got != want || ok != (want != "") {
			t.Errorf("chargeID(%s) = %q, %v; want %q", body, got, ok, want)
		}
	}
}

// classify keeps the table of definitive answers of docs/PAYOUTS.md:
// charged is 200 or 201 with an id, declined a 4xx that says something
// final, and everything else unknown.
func TestClassify(t *testing.T) {
	t.Parallel()
	withID := []byte(`{"id":"ch_1"}`)
	for _, tc := range []struct {
		status  int
		body    []byte
		readErr error
		want    string // charged, declined or unknown
	}{
		{200, withID, nil, "charged"},
		{201, withID, nil, "charged"},
		{201, []byte(`{"id":7}`), nil, "charged"},
		{201, withID, errors.New("cut"), "unknown"},
		{201, []byte(`{}`), nil, "unknown"},
		{200, []byte(`not json`), nil, "unknown"},
		{202, withID, nil, "unknown"},
		{204, nil, nil, "unknown"},
		{100, nil, nil, "unknown"},
		{301, withID, nil, "unknown"},
		{302, withID, nil, "unknown"},
		{303, nil, nil, "unknown"},
		{307, withID, nil, "unknown"},
		{308, withID, nil, "unknown"},
		{400, nil, nil, "declined"},
		{402, nil, nil, "declined"},
		{404, nil, nil, "declined"},
		{422, nil, nil, "declined"},
		{408, nil, nil, "unknown"},
		{409, nil, nil, "unknown"},
		{425, nil, nil, "unknown"},
		{429, nil, nil, "unknown"},
		{500, withID, nil, "unknown"},
		{502, nil, nil, "unknown"},
		{503, nil, nil, "unknown"},
	} {
		out, err := classify(tc.status, tc.body, tc.readErr)
		got := "unknown"
		switch {
		case err != nil:
		case out.Declined:
			got = "declined"
		case out.ChargeID != "":
			got = "charged"
		}
		if got != tc.want || (err == nil) == (got == "unknown") {
			t.Errorf("classify(%d, %s, %v) = %+v, %v: %s, want %s", tc.status, tc.body, tc.readErr, out, err, got, tc.want)
		}
	}
}
