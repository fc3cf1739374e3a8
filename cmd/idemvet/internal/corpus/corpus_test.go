package corpus_test

import (
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
)

// marked reports every line marked "// want" or "// nearmiss", none
// reports nothing: Measure must count the first's near misses as false
// positives, and the second's findings as misses.
var (
	marked = &analysis.Analyzer{Name: "marked", Doc: "every marked line", Run: func(pass *analysis.Pass) (any, error) {
		for _, f := range pass.Files {
			for _, g := range f.Comments {
				for _, c := range g.List {
					if strings.HasPrefix(c.Text, "// want ") || strings.HasPrefix(c.Text, "// nearmiss") {
						pass.Reportf(c.Pos(), "found")
					}
				}
			}
		}
		return nil, nil
	}}
	none = &analysis.Analyzer{Name: "none", Doc: "nothing", Run: func(*analysis.Pass) (any, error) { return nil, nil }}
)

func TestMeasureCounts(t *testing.T) {
	n, err := corpus.Measure(corpus.Dir(t), none, "effectcorpus")
	if err != nil || n.Wanted == 0 || n.NearMisses == 0 {
		t.Fatalf("none: %v, %v", n, err)
	}
	if n.TP != 0 || n.FP != 0 || n.FN != n.Wanted {
		t.Errorf("none: %v, want TP 0, FP 0, FN %d", n, n.Wanted)
	}
	m, err := corpus.Measure(corpus.Dir(t), marked, "effectcorpus")
	if err != nil || m.TP != m.Wanted || m.FP != m.NearMisses || m.FN != 0 {
		t.Errorf("marked: %v, %v; want every finding found and every near miss a false positive", m, err)
	}
}
