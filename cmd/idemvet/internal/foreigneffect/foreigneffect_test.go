package foreigneffect_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
	"github.com/idemkit/idem/cmd/idemvet/internal/foreigneffect"
)

func testdata(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestForeignEffect(t *testing.T) {
	analysistest.Run(t, testdata(t), foreigneffect.Analyzer, "foreign")
}

// TestCorpus measures precision and recall on the corpus of
// testdata/src/foreigncorpus (docs/IDEMVET.md).
func TestCorpus(t *testing.T) {
	s := corpus.Run(testdata(t), foreigneffect.Analyzer, "foreigncorpus")
	if len(s.Errors) > 0 {
		t.Fatalf("loading the corpus: %v", s.Errors)
	}
	t.Logf("foreigneffect: %d true positives, %d near misses: TP=%d FP=%d FN=%d", s.Positives, s.NearMisses, s.TP, s.FP, s.FN)
	if s.Positives < 10 || s.NearMisses < 10 {
		t.Errorf("corpus too small: %d positives, %d near misses", s.Positives, s.NearMisses)
	}
	if len(s.Unmarked) > 0 {
		t.Errorf("findings in unmarked funcs: %v", s.Unmarked)
	}
	if s.FP > 0 || s.FN > 0 {
		t.Errorf("FP=%d FN=%d, want 0 and 0 (or document the miss and mark the case)", s.FP, s.FN)
	}
}
