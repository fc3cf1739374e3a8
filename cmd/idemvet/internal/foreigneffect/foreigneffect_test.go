package foreigneffect_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
	"github.com/idemkit/idem/cmd/idemvet/internal/foreigneffect"
)

func TestForeignEffect(t *testing.T) {
	analysistest.Run(t, corpus.Dir(t), foreigneffect.Analyzer, "foreign")
}

// TestCorpus measures precision and recall on the corpus of
// testdata/src/foreigncorpus (docs/IDEMVET.md).
func TestCorpus(t *testing.T) {
	corpus.Check(t, foreigneffect.Analyzer, "foreigncorpus")
}
