package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/idemkit/idem/internal/check"
)

const openAPISynopsis = `check --openapi FILE [--base URL] [flags]

check --openapi lists every state-changing operation (POST, PUT, PATCH,
DELETE) of an OpenAPI 3.0 or 3.1 document, JSON or YAML: whether it
declares the key header, 409 and 422 answers, and a request example. A
POST or PATCH without the key header is flagged "retries may duplicate".

With --base, it audits each operation that has a request example, as
"idem check URL" audits one endpoint (docs/CHECK.md), and prints one
report. Path parameters come from the document's examples or --param.
Exit status: 0 when no rule failed, 1 when one failed or an audit could
not run, 2 on a usage error (a file that is not an OpenAPI 3 document).`

// openAPIRequested reports whether an idem check command line asks for
// --openapi.
func openAPIRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name := strings.TrimLeft(a, "-")
		if len(name) < len(a) && len(a)-len(name) <= 2 && (name == "openapi" || strings.HasPrefix(name, "openapi=")) {
			return true
		}
	}
	return false
}

// paramFlags is the repeatable --param name=value.
type paramFlags map[string]string

func (p *paramFlags) String() string {
	var s []string
	for k, v := range *p {
		s = append(s, k+"="+v)
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

func (p *paramFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n{}/") {
		return fmt.Errorf("want name=value, got %q", v)
	}
	if *p == nil {
		*p = paramFlags{}
	}
	(*p)[name] = value
	return nil
}

// openAPIOptions is idem check --openapi's command line: idem check's
// flags, which apply to every operation audited, and its own.
type openAPIOptions struct {
	checkOptions
	openapi string
	base    string
	params  paramFlags

	// Set by validate.
	doc *apiDocument
}

func (o *openAPIOptions) flags(fs *flag.FlagSet) {
	o.checkOptions.flags(fs)
	fs.StringVar(&o.openapi, "openapi", "", "list (and with --base audit) every state-changing operation of this OpenAPI 3.0 or 3.1 document, JSON or YAML")
	fs.StringVar(&o.base, "base", "", "with --openapi: audit the operations that have a request example on the server at this URL (http://host:port/prefix)")
	fs.Var(&o.params, "param", "with --openapi: a parameter's value 'name=value', for path and required query parameters; overrides the document's example; repeatable")
}

// validate reads the document: one that cannot be read is a usage error.
func (o *openAPIOptions) validate() error {
	for _, f := range []string{"X", "d", "d2", "plan"} {
		if o.given[f] {
			return usageError{fmt.Sprintf("check: --openapi takes the method and body of each operation from the document, not -%s", f)}
		}
	}
	switch {
	case o.openapi == "":
		return usageError{"check: --openapi needs a file"}
	case len(o.args) > 0:
		return usageError{fmt.Sprintf("check: --openapi takes no URL (got %q): give --base", o.args[0])}
	}
	if o.base != "" {
		// The flags every audit shares, checked once.
		if _, err := o.checkFlags.target("", o.base); err != nil {
			return usageError{strings.Replace(err.Error(), "URL ", "--base ", 1)}
		}
	}
	doc, err := loadOpenAPI(o.openapi, o.keyHeader)
	if err != nil {
		return err
	}
	for name := range o.params {
		if !slices.ContainsFunc(doc.Operations, func(op *apiOperation) bool { return op.hasParam(name) }) {
			return usageError{fmt.Sprintf("check: --param %s: no state-changing operation of %s has a path or required query parameter %q", name, o.openapi, name)}
		}
	}
	o.doc = doc
	return nil
}

func (op *apiOperation) hasParam(name string) bool {
	_, ok := op.pathParams[name]
	return ok || slices.ContainsFunc(op.queryParams, func(p apiParam) bool { return p.name == name })
}

// runOpenAPI is idem check --openapi.
func (c *checkCommand) runOpenAPI(ctx context.Context, args []string) error {
	o := new(openAPIOptions)
	if err := c.parseOptions("check", openAPISynopsis, flagsAnywhere, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.openAPI(ctx, o)
}

// apiAudit is one operation in the --openapi report.
type apiAudit struct {
	*apiOperation
	// NotAudited says why the operation was not audited (with --base).
	NotAudited string        `json:"not_audited,omitempty"`
	Report     *check.Report `json:"report,omitempty"`
}

func (a *apiAudit) name() string {
	s := a.Method + " " + a.Path
	if a.OperationID != "" {
		s += " (" + a.OperationID + ")"
	}
	return s
}

func (c *checkCommand) openAPI(ctx context.Context, o *openAPIOptions) error {
	audits := make([]*apiAudit, len(o.doc.Operations))
	for i, op := range o.doc.Operations {
		audits[i] = &apiAudit{apiOperation: op}
	}
	if o.base == "" {
		if o.jsonOut {
			return writeOpenAPIJSON(c.Stdout, o, audits, nil)
		}
		return writeInventory(c.Stdout, o, audits)
	}
	doer := check.ClientDoer(nil)
	var reports []*check.Report
	for _, a := range audits {
		if ctx.Err() != nil {
			a.NotAudited = "interrupted"
			continue
		}
		t, why := o.target(a.apiOperation)
		if why != "" {
			a.NotAudited = why
			continue
		}
		rep, err := check.Run(ctx, doer, t.endpoint(doer))
		if err != nil {
			a.NotAudited = strings.TrimPrefix(err.Error(), "check: ")
			continue
		}
		a.Report = rep
		reports = append(reports, rep)
	}
	var err error
	if o.jsonOut {
		err = writeOpenAPIJSON(c.Stdout, o, audits, reports)
	} else {
		err = writeOpenAPIReport(c.Stdout, o, audits, reports)
	}
	if err != nil {
		return err
	}
	return checkVerdict(ctx, reports)
}

// target is the single-endpoint audit of op, or why there is none.
func (o *openAPIOptions) target(op *apiOperation) (checkTarget, string) {
	switch {
	case op.body == nil:
		return checkTarget{}, op.bodyProblem
	case !op.KeyHeader && (op.Method == "PUT" || op.Method == "DELETE"):
		return checkTarget{}, fmt.Sprintf("declares no %s header, and %s is idempotent by its method: the key rules do not apply", o.keyHeader, op.Method)
	}
	path := op.Path
	for name, example := range op.pathParams {
		v, ok := o.params[name]
		if !ok {
			v = example
		}
		if v == "" {
			return checkTarget{}, fmt.Sprintf("no example value for path parameter %q: give --param %s=VALUE", name, name)
		}
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	if strings.ContainsAny(path, "{}") {
		return checkTarget{}, "the path has a parameter the operation does not declare"
	}
	q := url.Values{}
	for _, p := range op.queryParams {
		v, ok := o.params[p.name]
		if !ok {
			v = p.value
		}
		if v == "" {
			return checkTarget{}, fmt.Sprintf("no example value for required query parameter %q: give --param %s=VALUE", p.name, p.name)
		}
		q.Set(p.name, v)
	}
	u := strings.TrimRight(o.base, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}

	f := o.checkFlags
	f.method, f.data, f.d2 = op.Method, "", ""
	f.keyOptional = f.keyOptional || !op.KeyRequired
	f.header = slices.Clone(f.header)
	given := headers(f.header)
	if given.Get("Content-Type") == "" {
		f.header = append(f.header, "Content-Type: "+op.mediaType)
	}
	for _, h := range op.headers {
		if given.Get(h.name) != "" {
			continue
		}
		if h.value == "" {
			return checkTarget{}, fmt.Sprintf("no example value for required header %q: give -H '%s: VALUE'", h.name, h.name)
		}
		f.header = append(f.header, h.name+": "+h.value)
	}
	if op.effectsURL != "" {
		// The operation's own counter replaces the flags'.
		eu := op.effectsURL
		if strings.HasPrefix(eu, "/") {
			eu = strings.TrimRight(o.base, "/") + eu
		}
		f.effectsURL, f.effectsPath, f.effectsCmd = eu, op.effectsPath, ""
	}
	name := op.OperationID
	if name == "" {
		name = op.Method + " " + op.Path
	}
	t, err := f.target(name, u)
	if err != nil {
		return checkTarget{}, strings.TrimPrefix(err.Error(), "check: ")
	}
	t.Body = op.body
	return t, ""
}

// keyColumn is the inventory's KEY: required, optional or no.
func (op *apiOperation) keyColumn() string {
	switch {
	case op.KeyRequired:
		return "required"
	case op.KeyHeader:
		return "optional"
	}
	return "no"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
