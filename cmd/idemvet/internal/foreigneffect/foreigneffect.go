// Package foreigneffect defines an analyzer that finds an outbound HTTP or
// gRPC call inside atomic-mode work, an effect the guard's transaction
// cannot roll back (docs/IDEMVET.md).
package foreigneffect

import (
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/cmd/idemvet/internal/ignore"
	"github.com/idemkit/idem/cmd/idemvet/internal/worksite"
)

// Analyzer reports outbound HTTP and gRPC calls inside atomic-mode work.
var Analyzer = &analysis.Analyzer{
	Name: "foreigneffect",
	Doc: "report outbound HTTP and gRPC calls inside atomic-mode work\n\n" +
		"Atomic-mode work (Guard.Do work, an inbox handler, a batch row func, an atomic\n" +
		"idemhttp handler) commits its key and its database writes in one transaction;\n" +
		"a call to another service is not in it: a rollback or a retry leaves it made,\n" +
		"or makes it twice. Such a call belongs in leased mode (idem.Leased), in a\n" +
		"Run.Step, sending the step's Run.DerivedKey.",
	Run: run,
}

const grpcPath = "google.golang.org/grpc"

var httpMethods = map[string]bool{"Do": true, "Get": true, "Head": true, "Post": true, "PostForm": true}

func run(pass *analysis.Pass) (any, error) {
	ig := ignore.Collect(pass)
	ix := worksite.NewIndex(pass)
	reported := map[ast.Node]bool{}
	for _, site := range worksite.Find(pass) {
		worksite.Walk(pass, ix, site.Body, func(call *ast.CallExpr, via string) {
			if reported[call] {
				return
			}
			what := outbound(pass, call)
			if what == "" {
				return
			}
			reported[call] = true
			where := "in " + site.Kind
			if via != "" {
				where = "in " + via + ", called from " + site.Kind
			}
			ig.Report(pass, analysis.Diagnostic{Pos: call.Pos(), End: call.End(), Message: what + " " + where +
				" is an effect the transaction cannot roll back: run the work in leased mode (idem.Leased) " +
				"and make the call in a Run.Step, sending the step's Run.DerivedKey"})
		})
	}
	return nil, nil
}

// outbound names the outbound call call makes, or returns "".
func outbound(pass *analysis.Pass, call *ast.CallExpr) string {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	name := sel.Sel.Name
	s := pass.TypesInfo.Selections[sel]
	if s == nil {
		// A package-level func: http.Get and its kin.
		fn, ok := pass.TypesInfo.Uses[sel.Sel].(*types.Func)
		if ok && fn.Pkg() != nil && fn.Pkg().Path() == "net/http" && httpMethods[name] && name != "Do" {
			return "outbound HTTP call http." + name
		}
		return ""
	}
	if s.Kind() != types.MethodVal {
		return ""
	}
	n := named(s.Recv())
	if n == nil || n.Obj().Pkg() == nil {
		return ""
	}
	pkg, tname := n.Obj().Pkg(), n.Obj().Name()
	switch {
	case pkg.Path() == "net/http" && tname == "Client" && httpMethods[name]:
		return "outbound HTTP call (*http.Client)." + name
	case pkg.Path() == grpcPath && (tname == "ClientConn" || tname == "ClientConnInterface") && (name == "Invoke" || name == "NewStream"):
		return "outbound gRPC call grpc." + tname + "." + name
	case pkg.Path() != grpcPath && strings.HasSuffix(tname, "Client") && imports(pkg, grpcPath):
		return "outbound gRPC call " + pkg.Name() + "." + tname + "." + name
	}
	return ""
}

func named(t types.Type) *types.Named {
	t = types.Unalias(t)
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	n, _ := t.(*types.Named)
	return n
}

func imports(pkg *types.Package, path string) bool {
	for _, p := range pkg.Imports() {
		if p.Path() == path {
			return true
		}
	}
	return false
}
