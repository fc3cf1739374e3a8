package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idem/internal/check"
	"github.com/idemkit/idem/internal/checktest"
)

// openAPIOutput is the part of idem check --openapi --json the tests read.
type openAPIOutput struct {
	Version    string `json:"openapi"`
	Title      string
	All        int `json:"operations_total"`
	Operations []struct {
		apiOperation
		NotAudited string `json:"not_audited"`
		Report     *struct {
			Counted       bool
			EffectsCaused int64 `json:"effects_caused"`
			Error         string
			Rules         []struct {
				Rule   int
				Status check.Status
				Reason string
			}
		}
	}
	Audited       int
	Fail          int
	EffectsCaused int64 `json:"effects_caused"`
	Failed        bool
}

// op returns the operation of method and path.
func (o openAPIOutput) op(t *testing.T, method, path string) int {
	t.Helper()
	for i, op := range o.Operations {
		if op.Method == method && op.Path == path {
			return i
		}
	}
	t.Fatalf("no %s %s in the output", method, path)
	return -1
}

func (o openAPIOutput) statuses(i int) map[int]check.Status {
	m := map[int]check.Status{}
	for _, r := range o.Operations[i].Report.Rules {
		m[r.Rule] = r.Status
	}
	return m
}

// runOpenAPI runs idem check --json with args in process and returns its
// report and error.
func runOpenAPI(t *testing.T, args ...string) (openAPIOutput, error) {
	t.Helper()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard}
	err := m.Run(context.Background(), append([]string{"check", "--json"}, args...))
	var o openAPIOutput
	if jerr := json.Unmarshal(out.Bytes(), &o); jerr != nil {
		t.Fatalf("idem check %q: %v, and no JSON report (%v):\n%s", args, err, jerr, out.String())
	}
	return o, err
}

// The inventory of a 3.0 YAML and a 3.1 JSON document: every
// state-changing operation in the document's order, GETs left out; the
// key header found on the operation, on its path, through a $ref, in any
// case, or under --key-header; 409 and 422; the example on the media
// type, in examples (by $ref), on the schema (example, or 3.1 examples);
// a POST or PATCH without the key flagged.
func TestCheckOpenAPIInventory(t *testing.T) {
	t.Parallel()
	type row struct {
		method, path, id          string
		key, required, c409, c422 bool
		example                   bool
		note                      string
	}
	for _, tt := range []struct {
		file    string
		args    []string
		version string
		all     int
		want    []row
	}{
		{"shop-3.0.yaml", nil, "3.0.3", 7, []row{
			{"POST", "/orders", "createOrder", true, true, true, true, true, ""},
			{"PATCH", "/orders/{orderId}", "updateOrder", false, false, false, true, true, "retries may duplicate"},
			{"DELETE", "/orders/{orderId}", "cancelOrder", false, false, false, false, false, "idempotent by method"},
			{"POST", "/orders/{orderId}/refunds", "refundOrder", true, false, true, false, true, ""},
			{"PUT", "/carts", "", false, false, false, false, false, "idempotent by method"},
			{"POST", "/newsletter", "subscribe", false, false, false, false, true, "retries may duplicate"},
		}},
		{"shop-3.1.json", nil, "3.1.0", 2, []row{
			{"POST", "/orders", "createOrder", true, true, false, true, true, ""},
			{"DELETE", "/webhooks/{id}", "deleteWebhook", false, false, true, false, false, "idempotent by method"},
		}},
		{"shop-3.1.json", []string{"--key-header", "x-request-id"}, "3.1.0", 2, []row{
			{"POST", "/orders", "createOrder", false, false, false, true, true, "retries may duplicate"},
			{"DELETE", "/webhooks/{id}", "deleteWebhook", true, true, true, false, false, ""},
		}},
	} {
		t.Run(tt.file+strings.Join(tt.args, ""), func(t *testing.T) {
			t.Parallel()
			o, err := runOpenAPI(t, append([]string{"--openapi", filepath.Join("testdata", "openapi", tt.file)}, tt.args...)...)
			if err != nil {
				t.Fatalf("exit: %v, want 0", err)
			}
			if o.Version != tt.version || o.All != tt.all || o.Audited != 0 || o.Failed {
				t.Errorf("version %q, %d operations, %d audited, failed %v; want %q, %d, 0, false", o.Version, o.All, o.Audited, o.Failed, tt.version, tt.all)
			}
			var got []row
			for _, op := range o.Operations {
				got = append(got, row{op.Method, op.Path, op.OperationID, op.KeyHeader, op.KeyRequired,
					op.Declares409, op.Declares422, op.Example, op.Note})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d operations, want %d:\n%+v", len(got), len(tt.want), got)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("operation %d:\n got %+v\nwant %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// Without --json, the inventory is a table and a summary line.
func TestCheckOpenAPIInventoryText(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard}
	if err := m.Run(context.Background(), []string{"check", "--openapi", "testdata/openapi/shop-3.0.yaml"}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"idem check --openapi testdata/openapi/shop-3.0.yaml: OpenAPI 3.0.3, shop\n",
		"METHOD  PATH", "KEY       409  422  EXAMPLE  NOTE",
		"PATCH   /orders/{orderId}          updateOrder  no        no   yes  yes      retries may duplicate",
		"summary: 6 state-changing operations of 7: 2 declare Idempotency-Key, 2 POST or PATCH without it (retries may duplicate), 4 with a request example",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

// What an audit of each operation sends: the example serialized for its
// media type (JSON members in the document's order, a form), path and
// required query parameters from the examples or --param, required
// headers from the examples unless -H gives them, the Content-Type; or
// why the operation is not audited.
func TestCheckOpenAPITargets(t *testing.T) {
	t.Parallel()
	o := new(openAPIOptions)
	args := []string{"--openapi", "testdata/openapi/shop-3.0.yaml", "--base", "http://h:1/api/", "-H", "Authorization: Bearer a"}
	m := &Main{Stdout: io.Discard, Stderr: io.Discard}
	if err := m.parseOptions("check", openAPISynopsis, flagsAnywhere, args, o); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	type want struct{ url, body, contentType, notAudited string }
	wants := map[string]want{
		"createOrder": {"http://h:1/api/orders?currency=EUR", `{"sku":"tea","qty":2,"gift":false}`, "application/json", ""},
		"updateOrder": {"http://h:1/api/orders/o-17", `{"qty":3}`, "application/merge-patch+json", ""},
		"cancelOrder": {notAudited: "no request body"},
		"refundOrder": {notAudited: `no example value for path parameter "orderId": give --param orderId=VALUE`},
		"":            {notAudited: "no request example"},
		"subscribe":   {notAudited: `no example value for required header "X-List-Token": give -H 'X-List-Token: VALUE'`},
	}
	check := func(t *testing.T, o *openAPIOptions, wants map[string]want) {
		t.Helper()
		for _, op := range o.doc.Operations {
			w := wants[op.OperationID]
			tg, why := o.target(op)
			if why != w.notAudited {
				t.Errorf("%s: not audited %q, want %q", op.OperationID, why, w.notAudited)
				continue
			}
			if why != "" {
				continue
			}
			if tg.URL != w.url || string(tg.Body) != w.body || tg.Header.Get("Content-Type") != w.contentType ||
				tg.Method != op.Method || tg.Header.Get("Authorization") != headers(o.header).Get("Authorization") || tg.KeyOptional != !op.KeyRequired {
				t.Errorf("%s: %s %s %s Content-Type %q, %v, key optional %v; want %s %s Content-Type %q",
					op.OperationID, tg.Method, tg.URL, tg.Body, tg.Header.Get("Content-Type"), tg.Header, tg.KeyOptional, w.url, w.body, w.contentType)
			}
		}
	}
	check(t, o, wants)
	if tg, _ := o.target(o.doc.Operations[0]); tg.Header.Get("X-Tenant") != "t1" {
		t.Errorf("createOrder: X-Tenant %q, want the example t1", tg.Header.Get("X-Tenant"))
	}

	// --param fills in and overrides path and query parameters; -H gives
	// a required header.
	o.params = paramFlags{"orderId": "o/9", "currency": "CHF"}
	o.header = append(o.header, "X-List-Token: z")
	wants["createOrder"] = want{"http://h:1/api/orders?currency=CHF", `{"sku":"tea","qty":2,"gift":false}`, "application/json", ""}
	wants["subscribe"] = want{"http://h:1/api/newsletter", "email=a%40example.com&list=weekly", "application/x-www-form-urlencoded", ""}
	wants["refundOrder"] = want{"http://h:1/api/orders/o%2F9/refunds", `{"amount":5,"reason":"damaged"}`, "application/json", ""}
	wants["updateOrder"] = want{"http://h:1/api/orders/o%2F9", `{"qty":3}`, "application/merge-patch+json", ""}
	check(t, o, wants)

	// 3.1, the key header named X-Request-Id: the JSON media type
	// preferred, a schema's examples.
	o31 := new(openAPIOptions)
	args = []string{"--openapi", "testdata/openapi/shop-3.1.json", "--base", "http://h:1", "--key-header", "X-Request-Id"}
	if err := m.parseOptions("check", openAPISynopsis, flagsAnywhere, args, o31); err != nil {
		t.Fatal(err)
	}
	if err := o31.validate(); err != nil {
		t.Fatal(err)
	}
	check(t, o31, map[string]want{
		// Idempotency-Key is now a required header like any other.
		"createOrder":   {notAudited: `no example value for required header "Idempotency-Key": give -H 'Idempotency-Key: VALUE'`},
		"deleteWebhook": {notAudited: "no request body"},
	})
	o31.header = append(o31.header, "Idempotency-Key: k")
	check(t, o31, map[string]want{
		"createOrder":   {"http://h:1/orders", `{"sku":"tea","qty":2}`, "application/json", ""},
		"deleteWebhook": {notAudited: "no request body"},
	})
}

// Every mistake is a usage error (exit status 2) that says what is wrong.
func TestCheckOpenAPIUsageErrors(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "openapi")
	shop := filepath.Join(dir, "shop-3.0.yaml")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--openapi", filepath.Join(dir, "missing.yaml")}, "check: --openapi: open testdata/openapi/missing.yaml: no such file or directory"},
		{[]string{"--openapi", filepath.Join(dir, "broken.yaml")}, "check: --openapi testdata/openapi/broken.yaml: not an OpenAPI document: "},
		{[]string{"--openapi", filepath.Join(dir, "not-openapi.yaml")}, `check: --openapi testdata/openapi/not-openapi.yaml: not an OpenAPI 3.0 or 3.1 document (no "openapi: 3.x" field)`},
		{[]string{"--openapi", filepath.Join(dir, "swagger-2.0.yaml")}, "check: --openapi testdata/openapi/swagger-2.0.yaml: a Swagger 2.0 document: --openapi reads OpenAPI 3.0 and 3.1 (convert it first)"},
		{[]string{"--openapi="}, "check: --openapi needs a file"},
		{[]string{"--openapi", shop, "--param", "orderId"}, `invalid value "orderId" for flag -param: want name=value, got "orderId"`},
		{[]string{"--openapi", shop, "--param", "=x"}, `want name=value, got "=x"`},
		{[]string{"--openapi", shop, "--param", "nope=1"}, `check: --param nope: no state-changing operation of testdata/openapi/shop-3.0.yaml has a path or required query parameter "nope"`},
		{[]string{"--openapi", shop, "-d", "{}"}, "check: --openapi takes the method and body of each operation from the document, not -d"},
		{[]string{"--openapi", shop, "-X", "PUT"}, "not -X"},
		{[]string{"--openapi", shop, "--plan", "p.json"}, "not -plan"},
		{[]string{"--openapi", shop, "http://h/x"}, `check: --openapi takes no URL (got "http://h/x"): give --base`},
		{[]string{"--openapi", shop, "--base", "h:1"}, `check: --base "h:1": want an http:// or https:// URL`},
		{[]string{"--openapi", shop, "--base", "http://h:1", "--concurrency", "1"}, "check: --concurrency must be at least 2, got 1"},
		{[]string{"--openapi", shop, "--base", "http://h:1", "-H", "Idempotency-Key: k"}, "check: -H sets Idempotency-Key: the audit chooses the keys"},
	} {
		m := &Main{Stdout: io.Discard, Stderr: io.Discard}
		err := m.Run(context.Background(), append([]string{"check"}, tt.args...))
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("idem check %q: %v, want a usage error containing %q", tt.args, err, tt.want)
		}
	}
}

// openAPIRequested finds --openapi wherever it is, in each spelling, and
// nothing else.
func TestOpenAPIRequested(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--openapi", "f"}, true},
		{[]string{"-openapi=f"}, true},
		{[]string{"-H", "A: b", "--openapi=f", "--json"}, true},
		{[]string{"http://h/x", "-d", "{}"}, false},
		{[]string{"---openapi", "f"}, false},
		{[]string{"--openapi-x"}, false},
		{[]string{"--", "--openapi"}, false},
	} {
		if got := openAPIRequested(tt.args); got != tt.want {
			t.Errorf("openAPIRequested(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

// The audit of a document that describes a checktest fixture's POST
// /payments (testdata/openapi/payments.yaml): each fixture's verdicts are
// the single-endpoint audit's (checktest.Expected), counted through the
// operation's x-idem-effects-url; the exit status is 1 exactly when a
// rule failed, and an operation without an example is listed as not
// audited with its reason.
func TestCheckOpenAPIFixtures(t *testing.T) {
	t.Parallel()
	for _, d := range []checktest.Defect{checktest.Correct, checktest.SeparateTx, checktest.GlobalNamespace} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(checktest.New(checktest.Config{Defect: d}))
			t.Cleanup(ts.Close)
			o, err := runOpenAPI(t, "--openapi", "testdata/openapi/payments.yaml", "--base", ts.URL,
				"-H", "Authorization: Bearer alice", "--principal2", "Authorization: Bearer bob")
			want := checktest.Expected(d)
			wantFail := false
			for _, s := range want {
				wantFail = wantFail || s == check.Fail
			}
			if (err != nil) != wantFail || o.Failed != wantFail || o.Audited != 1 {
				t.Errorf("exit error %v, failed %v, %d audited; want failed %v, 1 audited", err, o.Failed, o.Audited, wantFail)
			}
			i := o.op(t, "POST", "/payments")
			if got := o.statuses(i); !maps.Equal(got, want) || !o.Operations[i].Report.Counted {
				t.Errorf("verdicts %v (counted %v), want %v (counted)", got, o.Operations[i].Report.Counted, want)
			}
			if r := o.Operations[o.op(t, "POST", "/refunds")]; r.Report != nil || r.NotAudited != "no request example" {
				t.Errorf("POST /refunds: not audited %q, want %q", r.NotAudited, "no request example")
			}
		})
	}
}

// The audit's text report: one line per operation with its key, each
// rule's verdict and its effects; the legend; the operations not audited;
// the findings; the totals.
func TestCheckOpenAPIReportText(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(checktest.New(checktest.Config{Defect: checktest.SeparateTx}))
	t.Cleanup(ts.Close)
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard}
	err := m.Run(context.Background(), []string{"check", "--openapi", "testdata/openapi/payments.yaml", "--base", ts.URL,
		"-H", "Authorization: Bearer alice"})
	if err == nil || !strings.Contains(err.Error(), "rule(s) failed") {
		t.Errorf("exit: %v, want rules failed", err)
	}
	failed := 0 // the first rule the defect fails
	for n := 8; n >= 1; n-- {
		if checktest.Expected(checktest.SeparateTx)[n] == check.Fail {
			failed = n
		}
	}
	for _, w := range []string{
		"OPERATION                       KEY       1     2     3     4     5     6     7     8     EFFECTS\n",
		"POST /payments (createPayment)  required  ",
		"rules: 1 retry, 2 concurrent, 3 different-body, 4 reordered-json, 5 missing-key, 6 malformed-key, 7 other-principal, 8 no-key-twice\n",
		"not audited:\n  POST /refunds (createRefund): no request example\n",
		"\nfindings:\n",
		fmt.Sprintf("\n  POST /payments (createPayment): %d %s FAIL: ", failed, check.Rules()[failed-1].Name),
		"total: 1 audited, 1 not audited: ",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

// A document with thousands of operations is listed whole.
func TestCheckOpenAPILarge(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(path, generateOpenAPI(1000), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := loadOpenAPI(path, "Idempotency-Key")
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Operations) != 3000 || doc.All != 4000 {
		t.Fatalf("%d state-changing of %d operations, want 3000 of 4000", len(doc.Operations), doc.All)
	}
	for i, op := range doc.Operations {
		wantKey := i%3 != 2 // POST, PUT, PATCH: the PATCH of each path has no key
		if op.KeyHeader != wantKey || !op.Example || !op.Declares409 {
			t.Fatalf("operation %d %s %s: key %v example %v 409 %v", i, op.Method, op.Path, op.KeyHeader, op.Example, op.Declares409)
		}
	}
}
