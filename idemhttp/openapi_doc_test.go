package idemhttp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem/idemhttp"
)

// openAPIMarker is the first line of the OpenAPI block in docs/HTTP.md.
const openAPIMarker = "# OpenAPI 3.1 components for routes protected by idemhttp"

// yamlNode is a value of the YAML subset the fragments use: block mappings
// (map[string]any), block sequences of scalars ([]any) and scalars
// (string).
type yamlNode = any

// parseYAML reads block mappings, block sequences of scalars and plain or
// quoted scalars, indented with spaces: the subset docs/HTTP.md's fragments
// are written in. Anything else is an error, so that the fragments stay in
// it.
func parseYAML(t *testing.T, lines []string) map[string]any {
	t.Helper()
	type frame struct {
		indent int
		m      map[string]any
		key    string // the key whose value is being read, in m
	}
	root := map[string]any{}
	stack := []*frame{{indent: -1, m: root}}
	for n, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(trimmed)
		for len(stack) > 1 && indent <= stack[len(stack)-1].indent {
			stack = stack[:len(stack)-1]
		}
		top := stack[len(stack)-1]
		if item, ok := strings.CutPrefix(trimmed, "- "); ok {
			// An item of the sequence that is the value of top.key in the
			// frame above.
			parent := stack[len(stack)-2]
			seq, _ := parent.m[top.key].([]any)
			if len(top.m) > 0 {
				t.Fatalf("docs/HTTP.md OpenAPI line %d: a sequence item after mapping members", n+1)
			}
			parent.m[top.key] = append(seq, unquote(item))
			continue
		}
		if k, ok := strings.CutSuffix(trimmed, ":"); ok {
			k = unquote(k)
			child := map[string]any{}
			top.m[k] = child
			stack = append(stack, &frame{indent: indent, m: child, key: k})
			// A sequence replaces the empty mapping when its items come.
			continue
		}
		k, v, ok := strings.Cut(trimmed, ": ")
		if !ok {
			t.Fatalf("docs/HTTP.md OpenAPI line %d: not a member: %q", n+1, trimmed)
		}
		top.m[unquote(k)] = unquote(v)
	}
	return root
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == '\'' && s[len(s)-1] == '\'' || s[0] == '"' && s[len(s)-1] == '"') {
		return s[1 : len(s)-1]
	}
	return s
}

// openAPIFragments returns the parsed OpenAPI block of docs/HTTP.md.
func openAPIFragments(t *testing.T) map[string]any {
	t.Helper()
	doc, err := os.ReadFile("../docs/HTTP.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n"+openAPIMarker+"\n")
	if !ok {
		t.Fatal("docs/HTTP.md has no OpenAPI block starting with " + openAPIMarker)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/HTTP.md: the OpenAPI block is not closed")
	}
	return parseYAML(t, strings.Split(block, "\n"))
}

// at walks a path of mapping keys.
func at(t *testing.T, n yamlNode, path ...string) yamlNode {
	t.Helper()
	for i, k := range path {
		m, ok := n.(map[string]any)
		if !ok {
			t.Fatalf("docs/HTTP.md OpenAPI: %s is not a mapping", strings.Join(path[:i], "."))
		}
		if n, ok = m[k]; !ok {
			t.Fatalf("docs/HTTP.md OpenAPI: no %s", strings.Join(path[:i+1], "."))
		}
	}
	return n
}

// The OpenAPI fragments of docs/HTTP.md say what the middleware sends: the
// key header's name, the replay marker, and the 409 and 422 problems with
// their headers, media type and fields, as a real exchange gives them.
func TestOpenAPIFragmentsMatchTheMiddleware(t *testing.T) {
	t.Parallel()
	c := at(t, openAPIFragments(t), "components")

	if got := at(t, c, "parameters", "IdempotencyKey", "name"); got != idemhttp.DefaultHeader {
		t.Errorf("key parameter name %q, want %q", got, idemhttp.DefaultHeader)
	}
	if got := at(t, c, "parameters", "IdempotencyKey", "in"); got != "header" {
		t.Errorf("key parameter in %q, want header", got)
	}
	if got := at(t, c, "parameters", "IdempotencyKey", "schema", "maxLength"); got != "257" {
		t.Errorf("key maxLength %q, want 257 (255 characters, quoted)", got)
	}
	if got := at(t, c, "schemas", "Problem", "required"); len(got.([]any)) != 3 {
		t.Errorf("Problem.required = %v", got)
	}

	e := setup(t)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := &effectHandler{before: func(http.ResponseWriter, *http.Request) {
		once.Do(func() {
			close(started)
			<-release
		})
	}}
	route := e.mw.Handler(h)
	first := make(chan int, 1)
	go func() { first <- serve(route, "POST", "/x", `{"a":1}`, withKey("k")).Code }()
	<-started
	inFlight := serve(route, "POST", "/x", `{"a":1}`, withKey("k"))
	close(release)
	if code := <-first; code != http.StatusCreated {
		t.Fatalf("first: %d", code)
	}
	replay := serve(route, "POST", "/x", `{"a":1}`, withKey("k"))
	reused := serve(route, "POST", "/x", `{"a":2}`, withKey("k"))

	// The replay marker.
	marker := at(t, c, "headers", "IdempotentReplayed", "schema", "const")
	if got := replay.Header().Get(idemhttp.ReplayedHeader); got != marker {
		t.Errorf("replay: %s = %q, the fragment says %q", idemhttp.ReplayedHeader, got, marker)
	}

	for name, w := range map[string]*httptest.ResponseRecorder{"IdempotencyInFlight": inFlight, "IdempotencyKeyReused": reused} {
		resp := at(t, c, "responses", name)
		content := at(t, resp, "content").(map[string]any)
		if len(content) != 1 {
			t.Errorf("%s: %d media types, want 1", name, len(content))
		}
		ex := at(t, content, idemhttp.ProblemContentType, "example").(map[string]any)
		if got := w.Header().Get("Content-Type"); got != idemhttp.ProblemContentType {
			t.Errorf("%s: Content-Type %q, want %q", name, got, idemhttp.ProblemContentType)
		}
		var p idemhttp.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ex["type"] != p.Type || ex["title"] != p.Title || ex["status"] != strconv.Itoa(p.Status) || ex["detail"] != p.Detail {
			t.Errorf("%s: the fragment's example %v, the middleware sent %+v", name, ex, p)
		}
		if p.Status != w.Code {
			t.Errorf("%s: status %d in the body, %d sent", name, p.Status, w.Code)
		}
		documented := map[string]bool{}
		if hs, ok := resp.(map[string]any)["headers"].(map[string]any); ok {
			for k := range hs {
				documented[k] = true
			}
		}
		if got, want := documented["Retry-After"], w.Header().Get("Retry-After") != ""; got != want {
			t.Errorf("%s: Retry-After documented %v, sent %v", name, got, want)
		}
	}
	if inFlight.Code != http.StatusConflict || reused.Code != http.StatusUnprocessableEntity {
		t.Fatalf("codes: in flight %d, reused %d", inFlight.Code, reused.Code)
	}
}
