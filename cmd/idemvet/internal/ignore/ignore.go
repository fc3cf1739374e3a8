// Package ignore finds the //idemvet:ignore comments that silence a
// finding on purpose. A comment silences the findings reported on its own
// line or on the line below it; it must give a reason
// ("//idemvet:ignore the key is the order id, made once by the caller"),
// and one without a reason silences nothing.
package ignore

import (
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Directive is the comment that silences a finding.
const Directive = "//idemvet:ignore"

// Set is the lines of a package that a reasoned //idemvet:ignore covers.
type Set map[string]map[int]bool // file name → line → silenced

// Collect reads the //idemvet:ignore comments of the files of pass.
func Collect(pass *analysis.Pass) Set {
	s := Set{}
	for _, f := range pass.Files {
		for _, g := range f.Comments {
			for _, c := range g.List {
				rest, ok := strings.CutPrefix(c.Text, Directive)
				if !ok || strings.TrimSpace(rest) == "" || !(rest[0] == ' ' || rest[0] == '\t') {
					continue
				}
				p := pass.Fset.Position(c.Slash)
				if s[p.Filename] == nil {
					s[p.Filename] = map[int]bool{}
				}
				s[p.Filename][p.Line] = true
				s[p.Filename][p.Line+1] = true
			}
		}
	}
	return s
}

// Silenced reports whether a finding at pos is covered.
func (s Set) Silenced(fset *token.FileSet, pos token.Pos) bool {
	p := fset.Position(pos)
	return s[p.Filename][p.Line]
}

// Report reports d unless an //idemvet:ignore covers its position.
func (s Set) Report(pass *analysis.Pass, d analysis.Diagnostic) {
	if s.Silenced(pass.Fset, d.Pos) {
		return
	}
	pass.Report(d)
}
