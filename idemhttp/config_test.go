package idemhttp_test

import (
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	g, err := idem.New(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cfg   idemhttp.Config
		field string
	}{
		{"EmptyMethods", idemhttp.Config{Methods: []string{}}, "Methods"},
		{"BadMethod", idemhttp.Config{Methods: []string{"PO ST"}}, "Methods"},
		{"BadHeader", idemhttp.Config{Header: "Idempotency Key"}, "Header"},
		{"BadFingerprintHeader", idemhttp.Config{FingerprintHeaders: []string{"a:b"}}, "FingerprintHeaders"},
		{"RecordSetCookie", idemhttp.Config{RecordHeaders: []string{"Content-Type", "set-cookie"}}, "RecordHeaders"},
		{"RecordHopByHop", idemhttp.Config{RecordHeaders: []string{"Transfer-Encoding"}}, "RecordHeaders"},
		{"RecordContentLength", idemhttp.Config{RecordHeaders: []string{"Content-Length"}}, "RecordHeaders"},
		{"NegativeMaxRequestBody", idemhttp.Config{MaxRequestBody: -1}, "MaxRequestBody"},
		{"NegativeMaxResponseBody", idemhttp.Config{MaxResponseBody: -1}, "MaxResponseBody"},
		{"NegativeRetryAfter", idemhttp.Config{UnavailableRetryAfter: -1}, "UnavailableRetryAfter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := idemhttp.New(g, &tc.cfg)
			if err == nil {
				t.Fatalf("New: got no error, want one naming %s", tc.field)
			}
			if !strings.Contains(err.Error(), "Config."+tc.field) {
				t.Errorf("error: got %q, want it to name Config.%s", err, tc.field)
			}
		})
	}
	if _, err := idemhttp.New(nil, nil); err == nil {
		t.Errorf("New(nil guard): got no error")
	}
	if _, err := idemhttp.New(g, nil); err != nil {
		t.Errorf("New(nil config): got %v, want defaults", err)
	}
}

// Empty RecordHeaders (not nil) records no headers at all.
func TestRecordNoHeaders(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{RecordHeaders: []string{}}))
	serve(e.mw.Handler(&effectHandler{}), "POST", "/x", "{}", withKey("k"))
	if rec := e.record(t, alice, "k"); rec == nil || len(rec.Result.Header) != 0 {
		t.Errorf("record: got %+v, want one without headers", rec)
	}
}
