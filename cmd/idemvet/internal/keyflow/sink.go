package keyflow

import (
	"go/ast"
	"go/types"
)

// Sink is a place where a value becomes an idempotency key.
type Sink struct {
	Node  ast.Node // the call, assignment or literal field
	Value ast.Expr // the value that becomes the key
}

// Sinks returns the places in body where a value becomes an idempotency
// key: a Set, Add, SetHeader, Pairs or AppendToOutgoingContext call with
// a key name (IsKeyName) before the value, an index assignment or a map
// literal entry under a key name, idemgrpc.WithKey, idemclient.Intent's
// Key field, and idemclient.Client.NewIntent (whose key it makes).
func Sinks(info *types.Info, body ast.Node) []Sink {
	var out []Sink
	isKey := func(e ast.Expr) bool {
		s, ok := StringConst(info, e)
		return ok && IsKeyName(s)
	}
	isIntent := func(e ast.Expr) bool {
		tv, ok := info.Types[e]
		return ok && IsNamed(tv.Type, Idem+"/idemclient", "Intent")
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if fn := Func(info, n); fn != nil && fn.Pkg() != nil {
				switch {
				case fn.Pkg().Path() == Idem+"/idemgrpc" && fn.Name() == "WithKey" && len(n.Args) == 2:
					out = append(out, Sink{n, n.Args[1]})
					return true
				case fn.Pkg().Path() == Idem+"/idemclient" && fn.Name() == "NewIntent":
					out = append(out, Sink{n, n})
					return true
				}
			}
			var name string
			switch f := ast.Unparen(n.Fun).(type) {
			case *ast.SelectorExpr:
				name = f.Sel.Name
			case *ast.Ident:
				name = f.Name
			}
			switch name {
			case "Set", "Add", "SetHeader", "Pairs", "AppendToOutgoingContext":
				for i := 0; i+1 < len(n.Args); i++ {
					if isKey(n.Args[i]) {
						out = append(out, Sink{n, n.Args[i+1]})
					}
				}
			}
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if i >= len(n.Rhs) {
					break
				}
				switch l := ast.Unparen(l).(type) {
				case *ast.IndexExpr:
					if isKey(l.Index) {
						out = append(out, Sink{n, n.Rhs[i]})
					}
				case *ast.SelectorExpr:
					if l.Sel.Name == "Key" && isIntent(l.X) {
						out = append(out, Sink{n, n.Rhs[i]})
					}
				}
			}
		case *ast.CompositeLit:
			intent := isIntent(n)
			for _, e := range n.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if id, ok := kv.Key.(*ast.Ident); (ok && intent && id.Name == "Key") || (!intent && isKey(kv.Key)) {
					out = append(out, Sink{kv, kv.Value})
				}
			}
		}
		return true
	})
	return out
}
