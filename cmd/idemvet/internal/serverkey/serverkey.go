// Package serverkey defines an analyzer that reports a server making up
// the idempotency key of a client's request (docs/DESIGN.md: the key is
// the client's; the server never invents it).
package serverkey

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/cmd/idemvet/internal/ignore"
	"github.com/idemkit/idem/cmd/idemvet/internal/keyflow"
)

// Analyzer reports the Key of an idem request set from a random, UUID or
// time source.
var Analyzer = &analysis.Analyzer{
	Name: "serverkey",
	Doc: `report a server that makes up the idempotency key of a client's request

The Key of idem.Request, idem.LeasedRequest, idem.BeginParams or
idem.ClaimParams names the client's intent, so it must come from the
request (its Idempotency-Key header, metadata or message id). A key made
by the server from a random, UUID or time source is new on every retry:
the guard never sees the retry as the same call and runs it again. Test
files, which play the client, are not checked.`,
	Run: run,
}

// requestTypes are the idem types whose Key is the client's key.
var requestTypes = []string{"Request", "LeasedRequest", "BeginParams", "ClaimParams"}

func isRequest(t types.Type) (string, bool) {
	for _, n := range requestTypes {
		if keyflow.IsNamed(t, keyflow.Idem, n) {
			return n, true
		}
	}
	return "", false
}

func run(pass *analysis.Pass) (any, error) {
	ign := ignore.Collect(pass)
	for _, f := range pass.Files {
		if strings.HasSuffix(pass.Fset.File(f.Pos()).Name(), "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				check(pass, ign, fd)
			}
		}
	}
	return nil, nil
}

func check(pass *analysis.Pass, ign ignore.Set, fd *ast.FuncDecl) {
	info := pass.TypesInfo
	flow := keyflow.Flow{Info: info, Body: fd.Body}
	done := map[token.Pos]bool{}
	report := func(typ string, v ast.Expr) {
		for _, src := range flow.Sources(v) {
			if done[src.Pos()] {
				continue
			}
			done[src.Pos()] = true
			ign.Report(pass, analysis.Diagnostic{
				Pos: src.Pos(), End: src.End(),
				Message: "the server makes up the client's idempotency key (idem." + typ +
					".Key from a random, UUID or time source): take it from the request, and refuse a request without one",
			})
		}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			typ, ok := isRequest(info.TypeOf(n))
			if !ok {
				return true
			}
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Key" {
						report(typ, kv.Value)
					}
				}
			}
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				sel, ok := ast.Unparen(l).(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Key" || i >= len(n.Rhs) {
					continue
				}
				if typ, ok := isRequest(info.TypeOf(sel.X)); ok {
					report(typ, n.Rhs[i])
				}
			}
		}
		return true
	})
}
