// Package effectoutsidetx defines an analyzer that finds a database write
// in atomic-mode work made through a handle that is not the guard's
// transaction (docs/IDEMVET.md).
package effectoutsidetx

import (
	"go/ast"
	"go/constant"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/cmd/idemvet/internal/ignore"
	"github.com/idemkit/idem/cmd/idemvet/internal/worksite"
)

// Analyzer reports writes through a *sql.DB, *sql.Conn, *pgxpool.Pool or
// *pgx.Conn inside atomic-mode work, where the write belongs in the
// transaction that TxFrom(ctx) returns.
var Analyzer = &analysis.Analyzer{
	Name: "effectoutsidetx",
	Doc: "report database writes in atomic-mode work made outside the guard's transaction\n\n" +
		"Inside work run by Guard.Do, an inbox handler, a batch row func or an atomic\n" +
		"idemhttp handler, a write through a *sql.DB, *sql.Conn, *pgxpool.Pool or\n" +
		"*pgx.Conn commits on its own: a failed or retried request repeats it, while\n" +
		"the key and the effect were meant to commit together in the transaction that\n" +
		"TxFrom(ctx) returns.",
	Run: run,
}

// handles are the database handles outside any transaction, by package
// path and type name.
var handles = map[string]string{
	"database/sql.DB":                      "*sql.DB",
	"database/sql.Conn":                    "*sql.Conn",
	"github.com/jackc/pgx/v5/pgxpool.Pool": "*pgxpool.Pool",
	"github.com/jackc/pgx/v5.Conn":         "*pgx.Conn",
}

// How each method of a handle is judged.
const (
	execMethod  = iota // a write unless its statement is a constant read
	queryMethod        // a write only if its statement is a constant write
	writeMethod        // always a write (CopyFrom, SendBatch)
	beginMethod        // a transaction of its own
)

var methods = map[string]int{
	"Exec": execMethod, "ExecContext": execMethod,
	"Query": queryMethod, "QueryContext": queryMethod,
	"QueryRow": queryMethod, "QueryRowContext": queryMethod,
	"CopyFrom": writeMethod, "SendBatch": writeMethod,
	"Begin": beginMethod, "BeginTx": beginMethod,
}

func run(pass *analysis.Pass) (any, error) {
	ig := ignore.Collect(pass)
	ix := worksite.NewIndex(pass)
	reported := map[ast.Node]bool{}
	for _, site := range worksite.Find(pass) {
		worksite.Walk(pass, ix, site.Body, func(call *ast.CallExpr, via string) {
			if reported[call] {
				return
			}
			msg, ok := check(pass, call)
			if !ok {
				return
			}
			reported[call] = true
			where := "in " + site.Kind
			if via != "" {
				where = "in " + via + ", called from " + site.Kind
			}
			ig.Report(pass, analysis.Diagnostic{Pos: call.Pos(), End: call.End(), Message: msg(where)})
		})
	}
	return nil, nil
}

// check judges call: a finding returns the message for where it is.
func check(pass *analysis.Pass, call *ast.CallExpr) (func(where string) string, bool) {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return nil, false
	}
	s := pass.TypesInfo.Selections[sel]
	if s == nil || s.Kind() != types.MethodVal {
		return nil, false
	}
	kind, ok := methods[sel.Sel.Name]
	if !ok {
		return nil, false
	}
	recv := s.Obj().Type().(*types.Signature).Recv()
	if recv == nil {
		return nil, false
	}
	t := types.Unalias(recv.Type())
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return nil, false
	}
	handle, ok := handles[n.Obj().Pkg().Path()+"."+n.Obj().Name()]
	if !ok {
		return nil, false
	}
	name := sel.Sel.Name
	if kind == beginMethod {
		return func(where string) string {
			return name + " on " + handle + " " + where + " begins a transaction of its own, which commits apart from the key: " +
				"write through the transaction from TxFrom(ctx), so that the key and the effect commit together"
		}, true
	}
	if kind != writeMethod {
		write, known := statement(pass, call)
		if known && !write || !known && kind == queryMethod {
			return nil, false
		}
	}
	return func(where string) string {
		return name + " on " + handle + " " + where + " writes outside the guard's transaction: " +
			"write through the transaction from TxFrom(ctx), so that the key and the effect commit together"
	}, true
}

// statement finds call's SQL (its first string argument) and, if it is a
// constant, reports whether it writes.
func statement(pass *analysis.Pass, call *ast.CallExpr) (write, known bool) {
	for _, a := range call.Args {
		tv := pass.TypesInfo.Types[a]
		b, ok := types.Unalias(tv.Type).Underlying().(*types.Basic)
		if !ok || b.Info()&types.IsString == 0 {
			continue
		}
		if tv.Value == nil || tv.Value.Kind() != constant.String {
			return false, false
		}
		return IsWrite(constant.StringVal(tv.Value)), true
	}
	return false, false
}

// writeWords are the statements that change the database.
var writeWords = []string{"INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "REPLACE", "CREATE", "ALTER", "DROP", "TRUNCATE"}

// IsWrite reports whether the SQL statement q changes the database: it
// starts (after comments) with a write keyword, or is a WITH whose body
// holds one.
func IsWrite(q string) bool {
	q = stripComments(q)
	first := strings.ToUpper(firstWord(q))
	if first == "WITH" {
		for _, w := range strings.FieldsFunc(strings.ToUpper(q), func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r == '_')
		}) {
			for _, k := range writeWords[:4] {
				if w == k {
					return true
				}
			}
		}
		return false
	}
	for _, k := range writeWords {
		if first == k {
			return true
		}
	}
	return false
}

func firstWord(q string) string {
	i := strings.IndexFunc(q, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r == '_')
	})
	if i < 0 {
		return q
	}
	return q[:i]
}

// stripComments drops the leading blanks, -- comments and /* */ comments
// of q.
func stripComments(q string) string {
	for range len(q) + 1 {
		q = strings.TrimLeft(q, " \t\r\n(")
		switch {
		case strings.HasPrefix(q, "--"):
			i := strings.IndexByte(q, '\n')
			if i < 0 {
				return ""
			}
			q = q[i+1:]
		case strings.HasPrefix(q, "/*"):
			i := strings.Index(q, "*/")
			if i < 0 {
				return ""
			}
			q = q[i+2:]
		default:
			return q
		}
	}
	return q
}
