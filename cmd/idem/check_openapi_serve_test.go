package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/internal/checktest"
)

// serveOpenAPI is the document that describes idem serve.
var serveOpenAPI = filepath.Join("..", "..", "docs", "openapi.yaml")

// serviceRoutes returns the "METHOD /path" patterns the transfers service
// registers, read from its source: every mux.Handle and mux.HandleFunc
// call whose pattern is a string literal (conditional ones included:
// GET /metrics and POST /payouts).
func serviceRoutes(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join("internal", "transfers")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) /`)
	var routes []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && pattern.MatchString(s) {
				routes = append(routes, s)
			}
			return true
		})
	}
	if len(routes) < 5 {
		t.Fatalf("found %d routes in %s, want the service's (%v): has its registration changed shape?", len(routes), dir, routes)
	}
	slices.Sort(routes)
	return routes
}

// documentRoutes returns the "METHOD /path" of every operation of the
// OpenAPI document at path.
func documentRoutes(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var routes []string
	for p, item := range model.Model.Paths.PathItems.FromOldest() {
		for m, op := range map[string]*v3.Operation{"GET": item.Get, "HEAD": item.Head, "POST": item.Post,
			"PUT": item.Put, "PATCH": item.Patch, "DELETE": item.Delete, "OPTIONS": item.Options} {
			if op != nil {
				routes = append(routes, m+" "+p)
			}
		}
	}
	slices.Sort(routes)
	return routes
}

// docs/openapi.yaml describes every route the transfers service registers,
// with its method, and nothing else.
func TestOpenAPIDocumentMatchesRoutes(t *testing.T) {
	t.Parallel()
	served, documented := serviceRoutes(t), documentRoutes(t, serveOpenAPI)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served (cmd/idem/internal/transfers) but not in docs/openapi.yaml", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("%s is in docs/openapi.yaml but the service does not register it", r)
		}
	}
}

// idem check --openapi docs/openapi.yaml --base <idem serve on SQLite,
// payouts on>: POST /transfers and POST /payouts are audited, counted by
// their x-idem-effects-url, and pass as the single-endpoint audit of idem
// serve does; PUT /accounts/{id} is listed as not audited; no FAIL, exit
// status 0; and the effects the report counts are the ledger's.
func TestCheckOpenAPIServe(t *testing.T) {
	t.Parallel()
	_, provider := fakeprovider.Start(t, nil)
	s := startServe(t, "-db", filepath.Join(t.TempDir(), "openapi.db"), "-provider", provider, "-complete-interval", "1h")
	s.accounts(t)
	count := func(path string) int64 {
		status, body := s.do(t, "GET", path, "", "")
		var l struct{ Count int64 }
		if status != 200 || json.Unmarshal([]byte(body), &l) != nil {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		return l.Count
	}
	// Run from the repository's root, as docs/CHECK.md shows it.
	args := []string{"check", "--openapi", "docs/openapi.yaml", "--base", "http://" + s.addr,
		"-H", "Authorization: Bearer alice", "--principal2", "Authorization: Bearer bob"}
	run := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		cmd := exec.Command(binary, args...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), code
	}

	before := count("/transfers") + count("/payouts")
	out, code := run(append(args, "--json")...)
	var o openAPIOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("exit %d, no JSON report (%v):\n%s\n%s", code, err, out, s.stderr)
	}
	if code != 0 || o.Failed || o.Fail != 0 || o.Audited != 2 {
		t.Errorf("exit %d, failed %v, %d FAIL, %d audited; want 0, false, 0, 2\n%s", code, o.Failed, o.Fail, o.Audited, out)
	}
	want := checktest.Expected(checktest.Correct)
	for _, path := range []string{"/transfers", "/payouts"} {
		op := o.Operations[o.op(t, "POST", path)]
		if op.Report == nil {
			t.Errorf("POST %s: not audited: %s", path, op.NotAudited)
			continue
		}
		if got := o.statuses(o.op(t, "POST", path)); !maps.Equal(got, want) || !op.Report.Counted || op.Report.Error != "" {
			t.Errorf("POST %s: verdicts %v, counted %v, error %q; want %v, counted", path, got, op.Report.Counted, op.Report.Error, want)
		}
	}
	if op := o.Operations[o.op(t, "PUT", "/accounts/{id}")]; op.Report != nil || !strings.Contains(op.NotAudited, "idempotent by its method") {
		t.Errorf("PUT /accounts/{id}: not audited %q, want it not audited as idempotent by its method", op.NotAudited)
	}
	if op := o.Operations[o.op(t, "POST", "/webhooks/deposits")]; op.Report != nil || !strings.Contains(op.NotAudited, "no request example") {
		// Signed deliveries cannot be audited with the key rules: the
		// delivery id is the key, and only a signer can make one.
		t.Errorf("POST /webhooks/deposits: not audited %q, want it not audited for want of an example", op.NotAudited)
	}
	if made := count("/transfers") + count("/payouts") - before; o.EffectsCaused != made {
		t.Errorf("the report says %d effects caused, the ledger %d", o.EffectsCaused, made)
	}

	// The text report, as docs/CHECK.md shows it.
	text, code := run(args...)
	if code != 0 || !strings.Contains(text, "POST /transfers (createTransfer)  required  PASS") ||
		!strings.Contains(text, "not audited:\n  PUT /accounts/{id} (putAccount): ") || !strings.Contains(text, "total: 2 audited, 2 not audited: ") {
		t.Errorf("exit %d, text report:\n%s", code, text)
	}
	t.Logf("idem check --openapi docs/openapi.yaml --base http://%s -H 'Authorization: Bearer alice' --principal2 'Authorization: Bearer bob'\n%s", s.addr, text)
	s.stop(t)
}
