// Package keyflow holds what idemvet's key analyzers share: which calls
// make a fresh value (a random, UUID or time source), where a value
// becomes an idempotency key, which calls send an attempt, and a small
// data flow from a key back to the calls that made it.
package keyflow

import (
	"go/ast"
	"go/constant"
	"go/types"
	"strings"

	"golang.org/x/tools/go/types/typeutil"
)

// Idem is the module path of the idem packages.
const Idem = "github.com/idemkit/idem"

// IsKeyName reports whether s names a header or metadata entry that
// carries an idempotency key: Idempotency-Key (HTTP, and idemgrpc's
// idempotency-key metadata) or NATS's Nats-Msg-Id.
func IsKeyName(s string) bool {
	switch strings.ToLower(s) {
	case "idempotency-key", "nats-msg-id":
		return true
	}
	return false
}

// StringConst returns e's constant string value.
func StringConst(info *types.Info, e ast.Expr) (string, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}

// Func returns the function or method call calls, or nil.
func Func(info *types.Info, call *ast.CallExpr) *types.Func {
	fn, _ := typeutil.Callee(info, call).(*types.Func)
	return fn
}

// RecvName returns the name of fn's receiver type ("" for a function).
func RecvName(fn *types.Func) string {
	sig, _ := fn.Type().(*types.Signature)
	if sig == nil || sig.Recv() == nil {
		return ""
	}
	return TypeName(sig.Recv().Type())
}

// TypeName returns the name of t's named type, through one pointer.
func TypeName(t types.Type) string {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		return n.Obj().Name()
	}
	return ""
}

// IsNamed reports whether t (through one pointer) is the named type
// path.name.
func IsNamed(t types.Type, path, name string) bool {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Name() == name && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == path
}

func pkgPath(fn *types.Func) string {
	if fn.Pkg() == nil {
		return ""
	}
	return fn.Pkg().Path()
}

// IsSource reports whether call makes a fresh value each time it runs: a
// random source (crypto/rand, math/rand), a UUID, ULID or xid generator,
// the clock (time.Now), idem.RandomKey or idem.UUIDv7Key, or
// idemclient.Client.NewIntent (which makes a new key).
func IsSource(info *types.Info, call *ast.CallExpr) bool {
	fn := Func(info, call)
	if fn == nil {
		return false
	}
	path, name := pkgPath(fn), fn.Name()
	switch {
	case path == "crypto/rand", path == "math/rand", path == "math/rand/v2":
		return true
	case path == "time":
		return name == "Now"
	case path == "github.com/google/uuid", strings.HasPrefix(path, "github.com/gofrs/uuid"):
		return strings.HasPrefix(name, "New")
	case strings.HasPrefix(path, "github.com/oklog/ulid"):
		return name == "Make" || name == "MustNew" || name == "New"
	case path == "github.com/rs/xid":
		return name == "New"
	case path == Idem:
		return name == "RandomKey" || name == "UUIDv7Key"
	case path == Idem+"/idemclient":
		return name == "RandomKey" || name == "NewIntent"
	}
	return false
}

// IsSend reports whether call sends one attempt of a request: an
// http.Client's Do, Post, PostForm, Get or Head (and net/http's
// functions of those names), any RoundTrip method, a NATS publish or
// request, idemclient.Client.Do, a call through a gRPC invoker or
// streamer, or a gRPC stub method (one whose last parameter is
// ...CallOption).
func IsSend(info *types.Info, call *ast.CallExpr) bool {
	if tv, ok := info.Types[call.Fun]; ok {
		if n := TypeName(tv.Type); n == "UnaryInvoker" || n == "Streamer" {
			return true
		}
	}
	fn := Func(info, call)
	if fn == nil {
		return false
	}
	path, name, recv := pkgPath(fn), fn.Name(), RecvName(fn)
	switch {
	case name == "RoundTrip" && recv != "":
		return true
	case path == "net/http" && (recv == "Client" || recv == ""):
		switch name {
		case "Do", "Post", "PostForm", "Get", "Head":
			return true
		}
	case strings.Contains(path, "nats"):
		switch name {
		case "Publish", "PublishMsg", "Request", "RequestMsg", "PublishAsync", "PublishMsgAsync":
			return true
		}
	case path == Idem+"/idemclient":
		return recv == "Client" && name == "Do"
	case strings.Contains(path, "retryablehttp"):
		return recv == "Client" && (name == "Do" || name == "Post")
	}
	if sig, ok := fn.Type().(*types.Signature); ok && sig.Variadic() {
		last := sig.Params().At(sig.Params().Len() - 1).Type()
		if s, ok := last.(*types.Slice); ok && TypeName(s.Elem()) == "CallOption" {
			return true
		}
	}
	return false
}

// Flow follows a value back to the calls that made it, within one
// function body (closures included).
type Flow struct {
	Info *types.Info
	Body ast.Node
}

// Sources returns the source calls (IsSource) e's value comes from: the
// calls in e itself, and for each local variable e reads, the calls in
// the values assigned to it and the source calls it is passed to (as
// rand.Read(buf) fills buf).
func (f Flow) Sources(e ast.Expr) []*ast.CallExpr {
	return f.sources(e, map[*types.Var]bool{})
}

func (f Flow) sources(e ast.Node, seen map[*types.Var]bool) []*ast.CallExpr {
	var out []*ast.CallExpr
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if IsSource(f.Info, n) {
				out = append(out, n)
				return false
			}
		case *ast.FuncLit:
			return false
		case *ast.Ident:
			v, ok := f.Info.Uses[n].(*types.Var)
			if !ok || v.IsField() || seen[v] || v.Pos() < f.Body.Pos() || v.Pos() > f.Body.End() {
				return true
			}
			seen[v] = true
			out = append(out, f.assigned(v, seen)...)
		}
		return true
	})
	return out
}

// assigned returns the source calls of the values assigned to v.
func (f Flow) assigned(v *types.Var, seen map[*types.Var]bool) []*ast.CallExpr {
	var out []*ast.CallExpr
	is := func(e ast.Expr) bool {
		id, ok := ast.Unparen(e).(*ast.Ident)
		return ok && (f.Info.Defs[id] == v || f.Info.Uses[id] == v)
	}
	ast.Inspect(f.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if !is(l) {
					continue
				}
				if len(n.Rhs) == len(n.Lhs) {
					out = append(out, f.sources(n.Rhs[i], seen)...)
				} else if len(n.Rhs) == 1 {
					out = append(out, f.sources(n.Rhs[0], seen)...)
				}
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if is(name) && i < len(n.Values) {
					out = append(out, f.sources(n.Values[i], seen)...)
				}
			}
		case *ast.CallExpr:
			if IsSource(f.Info, n) {
				for _, a := range n.Args {
					if is(a) {
						out = append(out, n)
					}
				}
			}
		}
		return true
	})
	return out
}

// Contains reports whether outer's source range holds inner.
func Contains(outer, inner ast.Node) bool {
	return outer.Pos() <= inner.Pos() && inner.End() <= outer.End()
}
