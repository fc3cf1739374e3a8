// Package worksite finds the code that idem runs as atomic-mode work, in
// the guard's transaction (docs/DESIGN.md): a func given where an
// idem.Work, an inbox.Handler or a batch.Apply is expected (Guard.Do,
// Inbox.Process, batch.Run and anything else taking those types), and the
// handler given to an idemhttp Middleware's Handler, Optional or a
// non-leased Route. The analyzers effectoutsidetx and foreigneffect look
// for effects inside it.
package worksite

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
)

// Import paths of the packages whose APIs mark atomic work.
const (
	IdemPath     = "github.com/idemkit/idem"
	InboxPath    = IdemPath + "/inbox"
	BatchPath    = IdemPath + "/batch"
	IdemHTTPPath = IdemPath + "/idemhttp"
)

// Site is one piece of atomic work: the body it runs and how it was
// given to idem.
type Site struct {
	Body *ast.BlockStmt
	// Kind says what runs it, for messages: "Guard.Do work".
	Kind string
}

// Find returns the atomic work of pass's package. A func named by an
// identifier or a method value is found when it is declared in the
// package, and a variable when it is defined as a func literal; a handler
// made elsewhere, or a variable assigned later, is followed no further.
func Find(pass *analysis.Pass) []Site {
	ix := NewIndex(pass)
	var sites []Site
	seen := map[*ast.BlockStmt]bool{}
	add := func(b *ast.BlockStmt, kind string) {
		if b != nil && !seen[b] {
			seen[b] = true
			sites = append(sites, Site{Body: b, Kind: kind})
		}
	}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if kind, ok := httpHandlerCall(pass, call); ok && len(call.Args) == 1 {
				add(handlerBody(pass, ix, call.Args[0]), kind)
				return true
			}
			sig, ok := pass.TypesInfo.TypeOf(call.Fun).(*types.Signature)
			if !ok {
				return true
			}
			for i, arg := range call.Args {
				if i >= sig.Params().Len() {
					break
				}
				if kind := workKind(sig.Params().At(i).Type()); kind != "" {
					add(funcBody(pass, ix, arg), kind+" "+calleeName(pass, call))
				}
			}
			return true
		})
	}
	return sites
}

// workKind names the atomic work type t, or returns "".
func workKind(t types.Type) string {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return ""
	}
	switch n.Obj().Pkg().Path() + "." + n.Obj().Name() {
	case IdemPath + ".Work":
		return "work given to"
	case InboxPath + ".Handler":
		return "inbox handler given to"
	case BatchPath + ".Apply":
		return "batch row func given to"
	}
	return ""
}

func calleeName(pass *analysis.Pass, call *ast.CallExpr) string {
	fun := ast.Unparen(call.Fun)
	if ix, ok := fun.(*ast.IndexExpr); ok {
		fun = ix.X
	}
	if ix, ok := fun.(*ast.IndexListExpr); ok {
		fun = ix.X
	}
	switch f := fun.(type) {
	case *ast.SelectorExpr:
		if sel := pass.TypesInfo.Selections[f]; sel != nil {
			if n := namedOf(sel.Recv()); n != nil {
				return n.Obj().Name() + "." + f.Sel.Name
			}
		}
		if id, ok := f.X.(*ast.Ident); ok {
			return id.Name + "." + f.Sel.Name
		}
		return f.Sel.Name
	case *ast.Ident:
		return f.Name
	}
	return "a call"
}

// httpHandlerCall reports whether call wraps a handler in atomic mode:
// m.Handler(h), m.Optional(h) or m.Route(o)(h) with o not leased, m an
// *idemhttp.Middleware.
func httpHandlerCall(pass *analysis.Pass, call *ast.CallExpr) (string, bool) {
	fun := ast.Unparen(call.Fun)
	if inner, ok := fun.(*ast.CallExpr); ok {
		sel, ok := ast.Unparen(inner.Fun).(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Route" || !isMiddleware(pass, sel) || len(inner.Args) != 1 {
			return "", false
		}
		if !notLeased(pass, inner.Args[0]) {
			return "", false
		}
		return "handler given to Middleware.Route", true
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Handler" && sel.Sel.Name != "Optional") || !isMiddleware(pass, sel) {
		return "", false
	}
	return "handler given to Middleware." + sel.Sel.Name, true
}

func isMiddleware(pass *analysis.Pass, sel *ast.SelectorExpr) bool {
	s := pass.TypesInfo.Selections[sel]
	if s == nil {
		return false
	}
	n := namedOf(s.Recv())
	return n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == IdemHTTPPath && n.Obj().Name() == "Middleware"
}

// notLeased reports whether the RouteOptions e surely has Leased false: a
// composite literal without Leased or with Leased set to the constant
// false. Anything else might be leased and is left alone.
func notLeased(pass *analysis.Pass, e ast.Expr) bool {
	lit, ok := ast.Unparen(e).(*ast.CompositeLit)
	if !ok {
		return false
	}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			return false // positional: cannot tell cheaply
		}
		if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Leased" {
			tv := pass.TypesInfo.Types[kv.Value]
			return tv.Value != nil && tv.Value.String() == "false"
		}
	}
	return true
}

// namedOf returns the named type of t or of what t points to.
func namedOf(t types.Type) *types.Named {
	t = types.Unalias(t)
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	n, _ := t.(*types.Named)
	return n
}

// Index maps the funcs and methods declared in a package to their
// declarations, and the variables defined as a func literal
// ("work := func(ctx context.Context) ...") to the literal.
type Index struct {
	funcs map[*types.Func]*ast.FuncDecl
	lits  map[*types.Var]*ast.FuncLit
}

// NewIndex indexes pass's package.
func NewIndex(pass *analysis.Pass) *Index {
	ix := &Index{funcs: map[*types.Func]*ast.FuncDecl{}, lits: map[*types.Var]*ast.FuncLit{}}
	def := func(id *ast.Ident, e ast.Expr) {
		lit, ok := ast.Unparen(e).(*ast.FuncLit)
		if v, isVar := pass.TypesInfo.Defs[id].(*types.Var); ok && isVar {
			ix.lits[v] = lit
		}
	}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if fn, ok := pass.TypesInfo.Defs[n.Name].(*types.Func); ok && n.Body != nil {
					ix.funcs[fn] = n
				}
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, l := range n.Lhs {
						if id, ok := l.(*ast.Ident); ok {
							def(id, n.Rhs[i])
						}
					}
				}
			case *ast.ValueSpec:
				if len(n.Names) == len(n.Values) {
					for i, id := range n.Names {
						def(id, n.Values[i])
					}
				}
			}
			return true
		})
	}
	return ix
}

// funcBody returns the body of the func e denotes: a literal, a
// conversion of one, a variable defined as a literal, or a func or
// method of the package named by e.
func funcBody(pass *analysis.Pass, ix *Index, e ast.Expr) *ast.BlockStmt {
	e = ast.Unparen(e)
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 1 {
		if tv, ok := pass.TypesInfo.Types[call.Fun]; ok && tv.IsType() {
			return funcBody(pass, ix, call.Args[0])
		}
		return nil
	}
	if lit, ok := e.(*ast.FuncLit); ok {
		return lit.Body
	}
	if id, ok := e.(*ast.Ident); ok {
		if v, ok := pass.TypesInfo.Uses[id].(*types.Var); ok && ix.lits[v] != nil {
			return ix.lits[v].Body
		}
	}
	if fn := Callee(pass, e); fn != nil {
		if fd := ix.funcs[fn]; fd != nil {
			return fd.Body
		}
	}
	return nil
}

// handlerBody returns the body that serves requests for the http.Handler
// e: a func converted with http.HandlerFunc, or the ServeHTTP method,
// declared in the package, of e's type.
func handlerBody(pass *analysis.Pass, ix *Index, e ast.Expr) *ast.BlockStmt {
	if b := funcBody(pass, ix, e); b != nil {
		return b
	}
	t := pass.TypesInfo.TypeOf(e)
	if t == nil || types.IsInterface(t) {
		return nil
	}
	obj, _, _ := types.LookupFieldOrMethod(t, true, pass.Pkg, "ServeHTTP")
	if fn, ok := obj.(*types.Func); ok {
		if fd := ix.funcs[fn]; fd != nil {
			return fd.Body
		}
	}
	return nil
}

// Callee returns the func or method e names (an identifier, a qualified
// name or a method value), or nil.
func Callee(pass *analysis.Pass, e ast.Expr) *types.Func {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		fn, _ := pass.TypesInfo.Uses[x].(*types.Func)
		return fn
	case *ast.SelectorExpr:
		fn, _ := pass.TypesInfo.Uses[x.Sel].(*types.Func)
		return fn
	case *ast.IndexExpr:
		return Callee(pass, x.X)
	case *ast.IndexListExpr:
		return Callee(pass, x.X)
	}
	return nil
}

// InStep reports whether call is a leased Run's Step or
// LocalStep, whose fn the leased engine records once: not atomic work.
func InStep(pass *analysis.Pass, call *ast.CallExpr) bool {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Step" && sel.Sel.Name != "LocalStep") {
		return false
	}
	s := pass.TypesInfo.Selections[sel]
	if s == nil {
		return false
	}
	n := namedOf(s.Recv())
	return n != nil && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == IdemPath && n.Obj().Name() == "Run"
}

// Walk visits the calls of body and, once each, of the funcs and methods
// of the package that body calls directly (one level deep), skipping the
// fns given to a leased Run's Step. via is the name of the callee whose
// body holds the call, or "" for body itself.
func Walk(pass *analysis.Pass, ix *Index, body *ast.BlockStmt, visit func(call *ast.CallExpr, via string)) {
	seen := map[*ast.FuncDecl]bool{}
	var walk func(b ast.Node, via string, depth int)
	walk = func(b ast.Node, via string, depth int) {
		ast.Inspect(b, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if InStep(pass, call) {
				return false
			}
			visit(call, via)
			if depth == 0 {
				if fn := Callee(pass, call.Fun); fn != nil {
					if fd := ix.funcs[fn]; fd != nil && !seen[fd] && fd.Body != body {
						seen[fd] = true
						walk(fd.Body, fn.Name(), 1)
					}
				}
			}
			return true
		})
	}
	walk(body, "", 0)
}
