package corpus_test

import (
	"go/ast"
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
)

// every reports each top-level func, none reports nothing: the score must
// count them as the false positives and the misses they are.
var (
	every = &analysis.Analyzer{Name: "every", Doc: "every func", Run: func(pass *analysis.Pass) (any, error) {
		for _, f := range pass.Files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					pass.Reportf(fd.Pos(), "found")
				}
			}
		}
		return nil, nil
	}}
	none = &analysis.Analyzer{Name: "none", Doc: "nothing", Run: func(*analysis.Pass) (any, error) { return nil, nil }}
)

func TestScoreCounts(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	n := corpus.Run(dir, none, "effectcorpus")
	if len(n.Errors) > 0 || n.Positives == 0 || n.NearMisses == 0 {
		t.Fatalf("score of none: %+v", n)
	}
	if n.TP != 0 || n.FP != 0 || n.FN != n.Positives {
		t.Errorf("none: TP=%d FP=%d FN=%d, want 0, 0, %d", n.TP, n.FP, n.FN, n.Positives)
	}
	e := corpus.Run(dir, every, "effectcorpus")
	if e.TP != e.Positives || e.FP != e.NearMisses || e.FN != 0 || len(e.Unmarked) == 0 {
		t.Errorf("every: %+v, want every positive found, every near miss a false positive, the unmarked listed", e)
	}
}
