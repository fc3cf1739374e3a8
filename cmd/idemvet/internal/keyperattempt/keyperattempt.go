// Package keyperattempt defines an analyzer that reports an idempotency
// key made once per attempt instead of once per intent (docs/DESIGN.md: a
// retry carries the key of the intent it retries).
package keyperattempt

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/cmd/idemvet/internal/ignore"
	"github.com/idemkit/idem/cmd/idemvet/internal/keyflow"
)

// Analyzer reports an idempotency key made in code that runs once per
// attempt.
var Analyzer = &analysis.Analyzer{
	Name: "keyperattempt",
	Doc: `report an idempotency key made per attempt instead of per intent

A key (a value that reaches an Idempotency-Key header, idemclient's
Intent.Key, idemgrpc's idempotency-key metadata or a NATS Nats-Msg-Id
header) made from a random, UUID or time source inside a retry loop (a
for loop that sends), an http.RoundTripper's RoundTrip, a retrying
client's hook or a gRPC client interceptor is a new key on every attempt:
the server sees each retry as a new intent and runs it again.`,
	Run: run,
}

// region is code that runs once per attempt.
type region struct {
	body ast.Node
	what string
	loop ast.Stmt // the retry loop, when the region is one
	// barrier marks code that is not one attempt of its enclosing region
	// (a loop over items, a function literal such as a goroutine's): a
	// key made there is not reported for the regions around it.
	barrier bool
}

func run(pass *analysis.Pass) (any, error) {
	ign := ignore.Collect(pass)
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			check(pass, ign, fd)
		}
	}
	return nil, nil
}

func check(pass *analysis.Pass, ign ignore.Set, fd *ast.FuncDecl) {
	regions := collect(pass.TypesInfo, fd)
	if len(regions) == 0 {
		return
	}
	flow := keyflow.Flow{Info: pass.TypesInfo, Body: fd.Body}
	done := map[token.Pos]bool{}
	for _, s := range keyflow.Sinks(pass.TypesInfo, fd.Body) {
		for _, src := range flow.Sources(s.Value) {
			if done[src.Pos()] {
				continue
			}
			var in *region
			for i := range regions {
				r := &regions[i]
				if keyflow.Contains(r.body, src) && keyflow.Contains(r.body, s.Node) &&
					(in == nil || r.body.End()-r.body.Pos() < in.body.End()-in.body.Pos()) {
					in = r
				}
			}
			if in == nil || in.barrier {
				continue
			}
			done[src.Pos()] = true
			d := analysis.Diagnostic{
				Pos: src.Pos(), End: src.End(),
				Message: fmt.Sprintf("idempotency key made per attempt, in %s: make it once per intent, before the first attempt, and reuse it", in.what),
			}
			if in.loop != nil {
				d.SuggestedFixes = hoist(pass, in.loop, src)
			}
			ign.Report(pass, d)
		}
	}
}

// collect returns the regions of fd that run once per attempt.
func collect(info *types.Info, fd *ast.FuncDecl) []region {
	var out []region
	if fd.Recv != nil && fd.Name.Name == "RoundTrip" && fd.Type.Params.NumFields() == 1 &&
		keyflow.IsNamed(info.TypeOf(fd.Type.Params.List[0].Type), "net/http", "Request") {
		out = append(out, region{body: fd.Body, what: "RoundTrip, which runs once per attempt"})
	}
	interceptor := func(ft *ast.FuncType, body ast.Node) {
		for _, p := range ft.Params.List {
			if n := keyflow.TypeName(info.TypeOf(p.Type)); n == "UnaryInvoker" || n == "Streamer" {
				out = append(out, region{body: body, what: "a gRPC client interceptor, which runs once per call"})
				return
			}
		}
	}
	interceptor(fd.Type, fd.Body)
	hook := func(name string, v ast.Expr) {
		switch name {
		case "RequestLogHook", "PrepareRetry":
		default:
			return
		}
		if fl, ok := ast.Unparen(v).(*ast.FuncLit); ok {
			out = append(out, region{body: fl.Body, what: "the retry hook " + name + ", which runs once per attempt"})
		}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			out = append(out, region{body: n, barrier: true})
			interceptor(n.Type, n.Body)
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); ok {
				hook(id.Name, n.Value)
			}
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if sel, ok := l.(*ast.SelectorExpr); ok && i < len(n.Rhs) {
					hook(sel.Sel.Name, n.Rhs[i])
				}
			}
		case *ast.ForStmt:
			out = append(out, loopRegion(info, n, n.Body, true))
		case *ast.RangeStmt:
			// A range over an integer may repeat one request; a range over
			// a collection or channel sends one request per element, each
			// its own intent.
			b, ok := info.TypeOf(n.X).Underlying().(*types.Basic)
			out = append(out, loopRegion(info, n, n.Body, ok && b.Info()&types.IsInteger != 0))
		}
		return true
	})
	return out
}

// loopRegion returns the region of a loop: a retry loop when it may
// repeat and retries, a barrier otherwise.
func loopRegion(info *types.Info, loop ast.Stmt, body *ast.BlockStmt, repeats bool) region {
	if repeats && keyflow.Retries(info, body) {
		return region{body: body, what: "a retry loop", loop: loop}
	}
	return region{body: body, barrier: true}
}

// hoist returns the fix that moves the statement `key := <src…>` from the
// top level of loop's body to just before loop, when that is mechanical:
// the statement defines its variables with :=, reads nothing declared in
// the loop, stands alone on its lines, and its names are free before the
// loop.
func hoist(pass *analysis.Pass, loop ast.Stmt, src *ast.CallExpr) []analysis.SuggestedFix {
	var body *ast.BlockStmt
	switch l := loop.(type) {
	case *ast.ForStmt:
		body = l.Body
	case *ast.RangeStmt:
		body = l.Body
	}
	var stmt *ast.AssignStmt
	for _, s := range body.List {
		if a, ok := s.(*ast.AssignStmt); ok && a.Tok == token.DEFINE && keyflow.Contains(a, src) {
			stmt = a
		}
	}
	if stmt == nil {
		return nil
	}
	local := false
	for _, r := range stmt.Rhs {
		ast.Inspect(r, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if o := pass.TypesInfo.Uses[id]; o != nil && o.Pos() >= loop.Pos() && o.Pos() < loop.End() {
					local = true
				}
			}
			return true
		})
	}
	if local {
		return nil
	}
	scope := pass.Pkg.Scope().Innermost(loop.Pos())
	if scope != nil && pass.TypesInfo.Scopes[loop] == scope {
		scope = scope.Parent()
	}
	for _, l := range stmt.Lhs {
		if id, ok := l.(*ast.Ident); ok && scope != nil && scope.Lookup(id.Name) != nil {
			return nil
		}
	}
	tf := pass.Fset.File(stmt.Pos())
	content, err := pass.ReadFile(tf.Name())
	if err != nil {
		return nil
	}
	off := func(p token.Pos) int { return tf.Offset(p) }
	lineStart := func(p token.Pos) int { return off(tf.LineStart(tf.Line(p))) }
	blank := func(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }
	sStart, sEnd, lStart := off(stmt.Pos()), off(stmt.End()), lineStart(loop.Pos())
	nl := bytes.IndexByte(content[sEnd:], '\n')
	if nl < 0 || !blank(content[lineStart(stmt.Pos()):sStart]) || !blank(content[lStart:off(loop.Pos())]) {
		return nil
	}
	// A trailing comment moves with the statement; anything else stays.
	if rest := bytes.TrimSpace(content[sEnd : sEnd+nl]); len(rest) > 0 && !bytes.HasPrefix(rest, []byte("//")) {
		return nil
	}
	indent := content[lStart:off(loop.Pos())]
	text := string(bytes.TrimSpace(content[sStart:sEnd+nl])) + "\n" + string(indent)
	return []analysis.SuggestedFix{{
		Message: "make the key once, before the loop",
		TextEdits: []analysis.TextEdit{
			{Pos: loop.Pos(), End: loop.Pos(), NewText: []byte(text)},
			{Pos: tf.Pos(lineStart(stmt.Pos())), End: tf.Pos(sEnd + nl + 1)},
		},
	}}
}
