package keyperattempt_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
	"github.com/idemkit/idem/cmd/idemvet/internal/keyperattempt"
)

func TestKeyPerAttempt(t *testing.T) {
	analysistest.RunWithSuggestedFixes(t, corpus.Dir(t), keyperattempt.Analyzer, "keyperattempt")
}

// TestKeyPerAttemptCorpus measures the analyzer's precision and recall
// over its corpus (the figures of docs/IDEMVET.md).
func TestKeyPerAttemptCorpus(t *testing.T) {
	corpus.Check(t, keyperattempt.Analyzer, "keyperattempt")
}
