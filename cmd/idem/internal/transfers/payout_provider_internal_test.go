package transfers

import "testing"

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
