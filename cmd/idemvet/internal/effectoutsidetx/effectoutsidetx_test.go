package effectoutsidetx_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
	"github.com/idemkit/idem/cmd/idemvet/internal/effectoutsidetx"
)

func TestEffectOutsideTx(t *testing.T) {
	analysistest.Run(t, corpus.Dir(t), effectoutsidetx.Analyzer, "effect")
}

func TestIsWrite(t *testing.T) {
	for q, want := range map[string]bool{
		"INSERT INTO t VALUES (1)":                       true,
		"  update t set a = 1":                           true,
		"/* tag */ DELETE FROM t":                        true,
		"-- note\nMERGE INTO t USING s ON true":          true,
		"WITH x AS (DELETE FROM t RETURNING *) SELECT 1": true,
		"TRUNCATE t":                           true,
		"SELECT 1":                             false,
		"WITH x AS (SELECT 1) SELECT * FROM x": false,
		"":                                     false,
		"select updated_at from t":             false,
	} {
		if got := effectoutsidetx.IsWrite(q); got != want {
			t.Errorf("IsWrite(%q) = %v, want %v", q, got, want)
		}
	}
}

// TestCorpus measures precision and recall on the corpus of
// testdata/src/effectcorpus (docs/IDEMVET.md).
func TestCorpus(t *testing.T) {
	corpus.Check(t, effectoutsidetx.Analyzer, "effectcorpus")
}
