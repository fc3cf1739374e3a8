// Package retrywithoutkey defines an analyzer that reports a POST or
// PATCH sent through a retrying client without an idempotency key
// (docs/DESIGN.md: a retried write carries a key).
package retrywithoutkey

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/cmd/idemvet/internal/ignore"
	"github.com/idemkit/idem/cmd/idemvet/internal/keyflow"
)

// Analyzer reports a retried POST or PATCH that carries no key.
var Analyzer = &analysis.Analyzer{
	Name: "retrywithoutkey",
	Doc: `report a POST or PATCH sent through a retrying client without an idempotency key

A write retried without an Idempotency-Key runs once per attempt that
reaches the server: a timeout after the server applied it becomes a
duplicate. Retrying clients are a hand-written retry loop (a for loop that
sends with net/http and judges the result), hashicorp/go-retryablehttp,
and go-resty when the package sets SetRetryCount. A function that sets a
key header anywhere is taken to key its requests.`,
	Run: run,
}

func run(pass *analysis.Pass) (any, error) {
	ign := ignore.Collect(pass)
	restyRetries := false
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if fn := keyflow.Func(pass.TypesInfo, c); fn != nil && fn.Name() == "SetRetryCount" && isResty(fn) {
					restyRetries = true
				}
			}
			return true
		})
	}
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				check(pass, ign, fd, restyRetries)
			}
		}
	}
	return nil, nil
}

func pathOf(fn *types.Func) string {
	if fn.Pkg() == nil {
		return ""
	}
	return fn.Pkg().Path()
}

func isResty(fn *types.Func) bool {
	p := pathOf(fn)
	return strings.HasPrefix(p, "github.com/go-resty/resty") || strings.HasPrefix(p, "resty.dev/")
}

func isRetryable(fn *types.Func) bool { return strings.HasSuffix(pathOf(fn), "go-retryablehttp") }

func check(pass *analysis.Pass, ign ignore.Set, fd *ast.FuncDecl, restyRetries bool) {
	info := pass.TypesInfo
	keyed := len(keyflow.Sinks(info, fd.Body)) > 0
	report := func(call *ast.CallExpr, method, via string) {
		ign.Report(pass, analysis.Diagnostic{
			Pos: call.Pos(), End: call.End(),
			Message: fmt.Sprintf("%s sent through %s without an Idempotency-Key: a retried write carries a key, made once per intent before the first attempt", method, via),
		})
	}
	// method returns the method of the request e, when e is a variable
	// assigned from a NewRequest call of net/http or go-retryablehttp.
	method := func(e ast.Expr) string {
		id, ok := ast.Unparen(e).(*ast.Ident)
		if !ok {
			return ""
		}
		v := info.Uses[id]
		m := ""
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			a, ok := n.(*ast.AssignStmt)
			if !ok || len(a.Rhs) != 1 || len(a.Lhs) == 0 {
				return true
			}
			if l, ok := a.Lhs[0].(*ast.Ident); !ok || info.ObjectOf(l) != v {
				return true
			}
			c, ok := a.Rhs[0].(*ast.CallExpr)
			if !ok {
				return true
			}
			fn := keyflow.Func(info, c)
			if fn == nil || !(pathOf(fn) == "net/http" || isRetryable(fn)) {
				return true
			}
			i := -1
			switch fn.Name() {
			case "NewRequest":
				i = 0
			case "NewRequestWithContext":
				i = 1
			}
			if i >= 0 && i < len(c.Args) {
				m, _ = keyflow.StringConst(info, c.Args[i])
			}
			return true
		})
		return m
	}
	write := func(m string) bool { return m == "POST" || m == "PATCH" }
	inLoop := map[*ast.CallExpr]bool{}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		var body *ast.BlockStmt
		switch n := n.(type) {
		case *ast.ForStmt:
			body = n.Body
		case *ast.RangeStmt:
			if b, ok := info.TypeOf(n.X).Underlying().(*types.Basic); ok && b.Info()&types.IsInteger != 0 {
				body = n.Body
			}
		}
		if body != nil && keyflow.Retries(info, body) {
			keyflow.Inspect(body, func(n ast.Node) {
				if c, ok := n.(*ast.CallExpr); ok {
					inLoop[c] = true
				}
			})
		}
		return true
	})
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := keyflow.Func(info, c)
		if fn == nil {
			return true
		}
		recv := keyflow.RecvName(fn)
		switch {
		case pathOf(fn) == "net/http" && (recv == "Client" || recv == "") && inLoop[c]:
			switch fn.Name() {
			case "Post", "PostForm":
				report(c, "POST", "a retry loop")
			case "Do":
				if m := method(c.Args[0]); write(m) && !keyed {
					report(c, m, "a retry loop")
				}
			}
		case isRetryable(fn) && (recv == "Client" || recv == ""):
			switch fn.Name() {
			case "Post", "PostForm":
				report(c, "POST", "go-retryablehttp")
			case "Do":
				if m := method(c.Args[0]); write(m) && !keyed {
					report(c, m, "go-retryablehttp")
				}
			}
		case isResty(fn) && recv == "Request" && restyRetries && (fn.Name() == "Post" || fn.Name() == "Patch"):
			if !keyed {
				report(c, strings.ToUpper(fn.Name()), "go-resty with SetRetryCount")
			}
		}
		return true
	})
}
