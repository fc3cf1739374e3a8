package serverkey_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
	"github.com/idemkit/idem/cmd/idemvet/internal/serverkey"
)

func TestServerKey(t *testing.T) {
	analysistest.Run(t, corpus.Dir(t), serverkey.Analyzer, "serverkey")
}

// TestServerKeyCorpus measures the analyzer's precision and recall over
// its corpus (the figures of docs/IDEMVET.md).
func TestServerKeyCorpus(t *testing.T) {
	corpus.Check(t, serverkey.Analyzer, "serverkey")
}
