package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// idem serve -log-level sets the least level of serve's log: at warn, not
// even the "listening" line is written, nor any line of a request; at
// debug, each request's outcome is; by default, the info lines are.
func TestServeLogLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		args     []string
		listens  bool // the INFO line "idem serve: listening"
		requests bool // a line of idemhttp for the request is required
	}{
		{"Default", nil, true, false},
		{"Debug", []string{"-log-level", "debug"}, true, true},
		{"Warn", []string{"-log-level", "warn"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"-db", filepath.Join(t.TempDir(), "log.db")}, tc.args...)
			addr, stop, log := serveInProcess(t, func() {}, args...)
			for _, id := range []string{"a", "b"} {
				if status, body := httpDo(t, "PUT", "http://"+addr+"/accounts/"+id, "", `{"balance":1000}`); status != 200 {
					t.Fatalf("PUT /accounts/%s: %d %s", id, status, body)
				}
			}
			if status, body := httpDo(t, "POST", "http://"+addr+"/transfers", "k", `{"from":"a","to":"b","amount":5}`); status != 201 {
				t.Fatalf("POST /transfers: %d %s", status, body)
			}
			if err := stop(); err != nil {
				t.Fatalf("idem serve: %v\n%s", err, log)
			}
			out := log.String()
			if got := strings.Contains(out, `level=INFO msg="idem serve: listening"`); got != tc.listens {
				t.Errorf("the listening line written: %t, want %t\n%s", got, tc.listens, out)
			}
			if got := strings.Contains(out, `msg="idemhttp: `); tc.requests && !got {
				t.Errorf("no line of the request's outcome at debug\n%s", out)
			}
			if tc.name == "Warn" && (strings.Contains(out, "level=INFO") || strings.Contains(out, "level=DEBUG")) {
				t.Errorf("lines below warn written at -log-level warn\n%s", out)
			}
		})
	}
}
