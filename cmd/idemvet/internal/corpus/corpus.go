// Package corpus scores an analyzer on a corpus of small programs for
// idemvet's precision and recall tests. Each top-level func of the corpus
// is one case: a true positive when it holds a "// want" comment, a near
// miss when it holds a "// nearmiss" comment.
package corpus

import (
	"go/ast"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
)

// Score is an analyzer's figures on a corpus.
type Score struct {
	Positives, NearMisses int // cases of each kind
	TP, FP, FN            int
	Unmarked              []string // funcs with a finding but no mark
	Errors                []string // loading errors
}

type recorder struct{ errs *[]string }

func (r recorder) Errorf(format string, args ...any) {
	// analysistest reports each unmatched "want" and each finding without
	// one; the score counts them itself.
	if strings.HasPrefix(format, "loading") {
		*r.errs = append(*r.errs, format)
	}
}

// Run scores a on the package pkg of the GOPATH tree dir.
func Run(dir string, a *analysis.Analyzer, pkg string) Score {
	var s Score
	results := analysistest.Run(recorder{&s.Errors}, dir, a, pkg)
	for _, res := range results {
		if res.Err != nil {
			s.Errors = append(s.Errors, res.Err.Error())
			continue
		}
		pass := res.Pass
		for _, f := range pass.Files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				want, near := marks(f, fd)
				found := 0
				for _, dg := range res.Diagnostics {
					if fd.Pos() <= dg.Pos && dg.Pos < fd.End() {
						found++
					}
				}
				switch {
				case want:
					s.Positives++
					if found > 0 {
						s.TP++
					} else {
						s.FN++
					}
				case near:
					s.NearMisses++
					if found > 0 {
						s.FP++
					}
				case found > 0:
					s.Unmarked = append(s.Unmarked, fd.Name.Name)
				}
			}
		}
	}
	return s
}

func marks(f *ast.File, fd *ast.FuncDecl) (want, near bool) {
	for _, g := range f.Comments {
		if g.Pos() < fd.Pos() || g.Pos() >= fd.End() {
			continue
		}
		for _, c := range g.List {
			want = want || strings.HasPrefix(c.Text, "// want")
			near = near || strings.HasPrefix(c.Text, "// nearmiss")
		}
	}
	return want, near
}
