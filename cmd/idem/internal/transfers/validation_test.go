package transfers_test

import (
	"strings"
	"testing"
)

// A body with data after its JSON document is malformed: refused with 400
// before the idempotency layer, and nothing is applied.
func TestTrailingDataIsRefused(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t, b, true)
			for i, body := range []string{
				`{"from":"alice","to":"bob","amount":1}}`,
				`{"from":"alice","to":"bob","amount":1}]]]`,
				`{"from":"alice","to":"bob","amount":1} {"from":"alice","to":"bob","amount":1}`,
				`{"from":"alice","to":"bob","amount":1} x`,
			} {
				key := "trailing-" + string(rune('a'+i))
				if r := c.do("POST", "/transfers", key, "", body); r.status != 400 || r.header.Get("Idempotent-Replayed") != "" {
					t.Errorf("POST %s: %d %s, want an unrecorded 400", body, r.status, r.body)
				}
			}
			if r := c.do("PUT", "/accounts/alice", "", "", `{"balance":5}}`); r.status != 400 {
				t.Errorf("PUT with trailing data: %d %s, want 400", r.status, r.body)
			}
			if a, b := c.balance("alice"), c.balance("bob"); a != 10000 || b != 0 {
				t.Errorf("balances = %d, %d; want 10000, 0 (nothing applied)", a, b)
			}
			if n := c.transfers().Count; n != 0 {
				t.Errorf("transfers = %d, want 0", n)
			}
			// Whitespace after the document is not data.
			if r := c.do("POST", "/transfers", "ws", "", "{\"from\":\"alice\",\"to\":\"bob\",\"amount\":1} \r\n\t"); r.status != 201 {
				t.Errorf("trailing whitespace: %d %s, want 201", r.status, r.body)
			}
		})
	}
}

// Account ids are bounded and checked before any work: a huge id is a 400,
// never a 422 that quotes it and grows past what can be recorded (which
// idemhttp answers 500, an answer clients do not retry).
func TestAccountIDsAreBounded(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t, b, true)
			// '<' is escaped by the JSON encoder to six bytes: quoting
			// 200 KB of it would take a problem past the 1 MiB recording
			// limit.
			huge := strings.Repeat("<", 200<<10)
			for _, body := range []string{
				`{"from":"` + huge + `","to":"bob","amount":1}`,
				`{"from":"alice","to":"` + huge + `","amount":1}`,
				`{"from":"alice","to":"` + strings.Repeat("b", 65) + `","amount":1}`,
				`{"from":"alice","to":"bo b","amount":1}`,
				`{"to":"bob","amount":1}`,
			} {
				r := c.do("POST", "/transfers", "huge", "", body)
				if r.status != 400 || len(r.body) > 1024 {
					t.Errorf("POST with a bad account id (%d bytes of body): %d, %d bytes of answer; want a small 400", len(body), r.status, len(r.body))
				}
			}
			// Not recorded: the corrected retry with the same key runs.
			if r := c.do("POST", "/transfers", "huge", "", `{"from":"alice","to":"bob","amount":1}`); r.status != 201 {
				t.Errorf("corrected retry: %d %s, want 201", r.status, r.body)
			}
			long := strings.Repeat("a", 64)
			if r := c.do("PUT", "/accounts/"+long, "", "", `{"balance":1}`); r.status != 200 {
				t.Errorf("PUT a 64-byte id: %d %s, want 200", r.status, r.body)
			}
			if got := c.balance(long); got != 1 {
				t.Errorf("64-byte account = %d, want 1", got)
			}
			for _, id := range []string{long + "a", "a%20b", "%3C" + strings.Repeat("x", 10<<10)} {
				for _, method := range []string{"PUT", "GET"} {
					if r := c.do(method, "/accounts/"+id, "", "", `{"balance":1}`); r.status != 400 || len(r.body) > 1024 {
						t.Errorf("%s /accounts/<%d bytes>: %d, %d bytes; want a small 400", method, len(id), r.status, len(r.body))
					}
				}
			}
		})
	}
}
