package effectoutsidetx_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/idemkit/idem/cmd/idemvet/internal/corpus"
	"github.com/idemkit/idem/cmd/idemvet/internal/effectoutsidetx"
)

func testdata(t *testing.T) string {
	dir, err := filepath.Abs(filepath.Join("..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestEffectOutsideTx(t *testing.T) {
	analysistest.Run(t, testdata(t), effectoutsidetx.Analyzer, "effect")
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
	s := corpus.Run(testdata(t), effectoutsidetx.Analyzer, "effectcorpus")
	if len(s.Errors) > 0 {
		t.Fatalf("loading the corpus: %v", s.Errors)
	}
	t.Logf("effectoutsidetx: %d true positives, %d near misses: TP=%d FP=%d FN=%d", s.Positives, s.NearMisses, s.TP, s.FP, s.FN)
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
