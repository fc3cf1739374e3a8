package retrywithoutkey_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
	"github.com/idemkit/idem/cmd/idemvet/internal/retrywithoutkey"
)

func TestRetryWithoutKey(t *testing.T) {
	analysistest.Run(t, corpus.Dir(t), retrywithoutkey.Analyzer, "retrywithoutkey")
}

// TestRetryWithoutKeyCorpus measures the analyzer's precision and recall
// over its corpus (the figures of docs/IDEMVET.md).
func TestRetryWithoutKeyCorpus(t *testing.T) {
	corpus.Check(t, retrywithoutkey.Analyzer, "retrywithoutkey")
}
