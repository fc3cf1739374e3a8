package keyflow

import (
	"go/ast"
	"go/token"
	"go/types"
)

// Retries reports whether a loop body is a retry loop's: it sends (not
// in a function literal, such as a goroutine's) and an if statement
// judges the attempt's result (its condition reads the send's result)
// and stops or starts the next attempt (return, break or continue).
func Retries(info *types.Info, body *ast.BlockStmt) bool {
	isSend := func(n ast.Node) bool {
		found := false
		Inspect(n, func(n ast.Node) {
			if c, ok := n.(*ast.CallExpr); ok && IsSend(info, c) {
				found = true
			}
		})
		return found
	}
	result := map[types.Object]token.Pos{} // a send's result → where it is assigned
	Inspect(body, func(n ast.Node) {
		if a, ok := n.(*ast.AssignStmt); ok && isSend(a) {
			for _, l := range a.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					if o := info.ObjectOf(id); o != nil && (result[o] == 0 || a.Pos() < result[o]) {
						result[o] = a.Pos()
					}
				}
			}
		}
	})
	reads := func(e ast.Expr) bool {
		found := false
		Inspect(e, func(n ast.Node) {
			if id, ok := n.(*ast.Ident); ok && result[info.Uses[id]] != 0 && result[info.Uses[id]] < id.Pos() {
				found = true
			}
		})
		return found || isSend(e)
	}
	exits := func(n ast.Node) bool {
		found := false
		Inspect(n, func(n ast.Node) {
			switch n := n.(type) {
			case *ast.ReturnStmt:
				found = true
			case *ast.BranchStmt:
				found = found || n.Tok == token.BREAK || n.Tok == token.CONTINUE
			}
		})
		return found
	}
	found := false
	Inspect(body, func(n ast.Node) {
		if s, ok := n.(*ast.IfStmt); ok && reads(s.Cond) && (exits(s.Body) || s.Else != nil && exits(s.Else)) {
			found = true
		}
	})
	return found
}

// Inspect calls f for each node of n, not descending into function
// literals.
func Inspect(n ast.Node, f func(ast.Node)) {
	ast.Inspect(n, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		f(n)
		return true
	})
}
