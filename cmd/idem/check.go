package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/check"
)

const checkSynopsis = `check [flags] URL [flags]
       idem check --plan FILE [flags]
       idem check --openapi FILE [--base URL] [flags] (see "idem check --openapi x -h")

check audits the duplicate path of one state-changing HTTP endpoint, on
any server in any language: it sends what a retrying client, concurrent
duplicates, a careless client and a second principal send, and judges each
answer by a rule (docs/CHECK.md):

  1 retry            retry with the same key: one effect, the original answer byte for byte
  2 concurrent       N at once with one key: one effect, the others 409 or the replay
  3 different-body   same key, one JSON member changed: 422, no effect
  4 reordered-json   same JSON reordered: the same request
  5 missing-key      no key: 400 (unless --key-optional)
  6 malformed-key    256 characters, two lines, a list, non-ASCII: 400 (accepted and kept safe: WARN)
  7 other-principal  --principal2 with the same key: its own execution; principal 1's answer unchanged
  8 no-key-twice     no key, twice: does it duplicate, or get another request's result?

One effect with a replayed header that differs is a WARN ("duplicate safe"),
not a FAIL; a rule whose baseline is broken (the identical retry refused)
is SKIP or WARN, never a PASS on no evidence.

Flags may come before or after the URL, as with curl. Count effects with
--effects-url and --effects-path, or --effects-cmd; without them effects are
inferred from the answers, which is weaker. check undoes none of the
effects it causes; it says how many there were. Exit status: 0 when no
rule failed (WARN and SKIP included), 1 when a rule failed or the audit
could not run, 2 on a usage error.`

type checkCommand struct {
	*Main
}

// headerFlags is a repeatable 'Name: value' flag.
type headerFlags []string

func (h *headerFlags) String() string { return strings.Join(*h, ", ") }

func (h *headerFlags) Set(v string) error {
	if _, _, err := parseHeader(v); err != nil {
		return err
	}
	*h = append(*h, v)
	return nil
}

// parseHeader splits 'Name: value'.
func parseHeader(s string) (string, string, error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return "", "", fmt.Errorf("want 'Name: value', got %q", s)
	}
	return name, strings.TrimSpace(value), nil
}

// headers turns 'Name: value' lines into a header; a later line of a name
// adds a value.
func headers(lines []string) http.Header {
	h := http.Header{}
	for _, l := range lines {
		name, value, _ := parseHeader(l)
		h.Add(name, value)
	}
	return h
}

// checkFlags is what the command line says about an endpoint; with a
// plan, each field is the default of every endpoint.
type checkFlags struct {
	method, data, d2, keyHeader         string
	header, principal2                  headerFlags
	keyOptional                         bool
	concurrency                         int
	effectsURL, effectsPath, effectsCmd string
	timeout                             time.Duration
}

// checkOptions is idem check's command line.
type checkOptions struct {
	commandLine
	checkFlags
	plan    string
	jsonOut bool

	// Set by validate.
	targets []checkTarget
}

func (o *checkOptions) flags(fs *flag.FlagSet) {
	f := &o.checkFlags
	fs.StringVar(&f.method, "X", "POST", "request method")
	fs.StringVar(&f.data, "d", "", "request body, or @FILE for a file's contents: one the endpoint accepts (a 2xx). A JSON body is sent as application/json unless -H sets Content-Type")
	fs.Var(&f.header, "H", "request header 'Name: value', e.g. credentials; repeatable")
	fs.StringVar(&f.keyHeader, "key-header", check.DefaultKeyHeader, "the idempotency key's header")
	fs.Var(&f.principal2, "principal2", "a second principal's credential 'Name: value', replacing the -H header of that name, for rule 7; repeatable")
	fs.BoolVar(&f.keyOptional, "key-optional", false, "the endpoint accepts requests without a key: rule 5 expects a 2xx")
	fs.IntVar(&f.concurrency, "concurrency", check.DefaultConcurrency, "concurrent duplicates sent by rule 2 (at least 2)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&f.effectsURL, "effects-url", "", "count effects with a GET of this URL, whose JSON answer holds a number at --effects-path; the -H headers go along when it is on the endpoint's host")
	fs.StringVar(&f.effectsPath, "effects-path", "", "with --effects-url: the number's dotted path, such as count, data.total, items.0.n, or items.# for an array's length; empty: the whole answer")
	fs.StringVar(&f.effectsCmd, "effects-cmd", "", "count effects by running this with sh -c: it prints a number (a SQL query, anything)")
	fs.StringVar(&f.d2, "d2", "", "rule 3's different body, or @FILE (default: the -d body with one JSON member changed)")
	fs.StringVar(&o.plan, "plan", "", "audit every endpoint of this JSON or YAML (.yaml, .yml) file, in one report (docs/CHECK.md); the flags are their defaults")
	fs.DurationVar(&f.timeout, "timeout", check.DefaultTimeout, "bound on each request and each count")
}

// validate also reads the files the command line names (the plan, -d
// @FILE, --d2 @FILE): one that cannot be read is a usage error.
func (o *checkOptions) validate() error {
	switch {
	case o.plan != "" && len(o.args) > 0:
		return usageError{"check: give a URL or --plan, not both"}
	case o.plan != "":
		var err error
		o.targets, err = loadPlan(o.plan, o.checkFlags)
		return err
	case len(o.args) != 1:
		return usageError{fmt.Sprintf("check: want one URL, got %d arguments (run \"idem check -h\")", len(o.args))}
	default:
		t, err := o.target("", o.args[0])
		if err != nil {
			return err
		}
		o.targets = []checkTarget{t}
		return nil
	}
}

// Run parses args, validates them and runs idem check. Flags may follow
// the URL, as with curl.
func (c *checkCommand) Run(ctx context.Context, args []string) error {
	if openAPIRequested(args) {
		return c.runOpenAPI(ctx, args) // check_openapi.go
	}
	o := new(checkOptions)
	if err := c.parseOptions("check", checkSynopsis, flagsAnywhere, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *checkCommand) run(ctx context.Context, o *checkOptions) error {
	doer := check.ClientDoer(nil)
	var reports []*check.Report
	for _, t := range o.targets {
		rep, err := check.Run(ctx, doer, t.endpoint(doer))
		if err != nil {
			return usageError{"check: " + strings.TrimPrefix(err.Error(), "check: ")}
		}
		reports = append(reports, rep)
		if ctx.Err() != nil {
			break
		}
	}
	if o.jsonOut {
		if err := writeCheckJSON(c.Stdout, reports); err != nil {
			return err
		}
	} else if err := check.WriteText(c.Stdout, reports); err != nil {
		return err
	}
	return checkVerdict(ctx, reports)
}

// checkTarget is one endpoint to audit and how to count its effects.
type checkTarget struct {
	check.Endpoint
	effectsURL, effectsPath, effectsCmd string
}

// target validates f for the endpoint at rawURL.
func (f checkFlags) target(name, rawURL string) (checkTarget, error) {
	t := checkTarget{effectsURL: f.effectsURL, effectsPath: f.effectsPath, effectsCmd: f.effectsCmd}
	bad := func(format string, args ...any) (checkTarget, error) {
		msg := fmt.Sprintf(format, args...)
		if name != "" {
			msg = fmt.Sprintf("endpoint %q: %s", name, msg)
		}
		return checkTarget{}, usageError{"check: " + msg}
	}
	if err := absoluteURL(rawURL); err != nil {
		return bad("URL %q: %v", rawURL, err)
	}
	body, err := readData(f.data)
	if err != nil {
		return bad("-d: %v", err)
	}
	var body2 []byte
	if f.d2 != "" {
		if body2, err = readData(f.d2); err != nil {
			return bad("--d2: %v", err)
		}
	}
	switch {
	case f.method == "" || strings.ContainsAny(f.method, " \t\r\n:/"):
		return bad("-X %q is not a method", f.method)
	case f.concurrency < 2:
		return bad("--concurrency must be at least 2, got %d", f.concurrency)
	case f.timeout <= 0:
		return bad("--timeout must be positive, got %s", f.timeout)
	case f.effectsURL != "" && f.effectsCmd != "":
		return bad("--effects-url and --effects-cmd: give one way to count")
	case f.effectsPath != "" && f.effectsURL == "":
		return bad("--effects-path needs --effects-url")
	case f.keyHeader == "" || strings.ContainsAny(f.keyHeader, " \t\r\n:"):
		return bad("--key-header %q is not a header name", f.keyHeader)
	}
	if f.effectsURL != "" {
		if err := absoluteURL(f.effectsURL); err != nil {
			return bad("--effects-url %q: %v", f.effectsURL, err)
		}
	}
	h := headers(f.header)
	if h.Get(f.keyHeader) != "" {
		return bad("-H sets %s: the audit chooses the keys", f.keyHeader)
	}
	t.Endpoint = check.Endpoint{
		Name:        name,
		Method:      f.method,
		URL:         rawURL,
		Header:      h,
		Body:        body,
		Body2:       body2,
		KeyHeader:   f.keyHeader,
		KeyOptional: f.keyOptional,
		Concurrency: f.concurrency,
		Timeout:     f.timeout,
	}
	if len(f.principal2) > 0 {
		t.Principal2 = headers(f.principal2)
	}
	return t, nil
}

// endpoint returns the endpoint with its effects counter.
func (t checkTarget) endpoint(d check.Doer) check.Endpoint {
	e := t.Endpoint
	switch {
	case t.effectsURL != "":
		// The endpoint's credentials go along to its own host only.
		var h http.Header
		if sameOrigin(t.effectsURL, e.URL) {
			h = e.Header.Clone()
		}
		e.Effects = check.URLCounter(d, t.effectsURL, h, t.effectsPath)
		e.EffectsSource = "GET " + t.effectsURL
		if t.effectsPath != "" {
			e.EffectsSource += " → " + t.effectsPath
		}
	case t.effectsCmd != "":
		e.Effects = check.CommandCounter(t.effectsCmd)
		e.EffectsSource = fmt.Sprintf("sh -c %q", t.effectsCmd)
	}
	return e
}

func absoluteURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http:// or https:// URL")
	}
	return nil
}

func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Scheme == ub.Scheme && strings.EqualFold(ua.Host, ub.Host)
}

// readData reads a -d value: the text itself, or @FILE's contents.
func readData(v string) ([]byte, error) {
	if name, ok := strings.CutPrefix(v, "@"); ok {
		return os.ReadFile(name)
	}
	return []byte(v), nil
}

// checkVerdict is the command's outcome: an error (exit status 1) when a
// rule failed or an audit could not run.
func checkVerdict(ctx context.Context, reports []*check.Report) error {
	var failed, stopped int
	for _, r := range reports {
		failed += r.Fail
		if r.Error != "" {
			stopped++
		}
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("check: interrupted: %w", ctx.Err())
	case stopped > 0:
		return fmt.Errorf("check: %d of %d audits could not run to the end (see the report); %d rule(s) failed", stopped, len(reports), failed)
	case failed > 0:
		return fmt.Errorf("check: %d rule(s) failed", failed)
	}
	return nil
}

// checkJSON is the --json output: the reports and their totals.
type checkJSON struct {
	Endpoints     []*check.Report `json:"endpoints"`
	Pass          int             `json:"pass"`
	Fail          int             `json:"fail"`
	Warn          int             `json:"warn"`
	Skip          int             `json:"skip"`
	EffectsCaused int64           `json:"effects_caused"`
	// Failed is true when the exit status is 1.
	Failed bool `json:"failed"`
}

func writeCheckJSON(w io.Writer, reports []*check.Report) error {
	out := checkJSON{Endpoints: reports}
	for _, r := range reports {
		out.Pass += r.Pass
		out.Fail += r.Fail
		out.Warn += r.Warn
		out.Skip += r.Skip
		out.EffectsCaused += r.EffectsCaused
		out.Failed = out.Failed || r.Failed()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
