// Package corpus measures an analyzer's precision and recall over its
// corpus under cmd/idemvet/internal/testdata/src: every line marked
// "// want" is a finding the analyzer must report (a true positive when it
// does, a false negative when it does not); every other line it reports
// is a false positive, the lines marked "// nearmiss" being the near
// misses a reviewer would reject as findings.
package corpus

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
)

// Counts are an analyzer's results over its corpus.
type Counts struct {
	Wanted, NearMisses int // marked lines
	TP, FP, FN         int
}

func (c Counts) String() string {
	return fmt.Sprintf("%d findings and %d near misses marked: TP %d, FP %d, FN %d", c.Wanted, c.NearMisses, c.TP, c.FP, c.FN)
}

// quiet is an analysistest.Testing that keeps analysistest's complaints
// for Measure to count instead of failing the test.
type quiet struct{ errs []string }

func (q *quiet) Errorf(format string, args ...any) {
	q.errs = append(q.errs, fmt.Sprintf(format, args...))
}

// Measure runs a over the packages pkgs of the testdata directory dir and
// counts its results against the marks.
func Measure(dir string, a *analysis.Analyzer, pkgs ...string) (Counts, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Counts{}, err
	}
	q := &quiet{}
	var c Counts
	for _, r := range analysistest.Run(q, dir, a, pkgs...) {
		if r.Err != nil {
			return c, r.Err
		}
		type line struct {
			file string
			n    int
		}
		want, near := map[line]bool{}, map[line]bool{}
		for _, f := range r.Pass.Files {
			for _, g := range f.Comments {
				for _, cm := range g.List {
					p := r.Pass.Fset.Position(cm.Slash)
					switch {
					case strings.HasPrefix(cm.Text, "// want "):
						want[line{p.Filename, p.Line}] = true
					case strings.HasPrefix(cm.Text, "// nearmiss"):
						near[line{p.Filename, p.Line}] = true
					}
				}
			}
		}
		c.Wanted += len(want)
		c.NearMisses += len(near)
		found := map[line]bool{}
		for _, d := range r.Diagnostics {
			p := r.Pass.Fset.PositionFor(d.Pos, false)
			found[line{p.Filename, p.Line}] = true
		}
		for l := range found {
			if want[l] {
				c.TP++
			} else {
				c.FP++
			}
		}
		for l := range want {
			if !found[l] {
				c.FN++
			}
		}
	}
	return c, nil
}

// Dir returns the absolute path of idemvet's testdata directory, from a
// test in a package of cmd/idemvet/internal.
func Dir(t interface{ Fatal(...any) }) string {
	dir, err := filepath.Abs("../testdata")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// T is the part of *testing.T that Check uses.
type T interface {
	Fatal(...any)
	Fatalf(string, ...any)
	Logf(string, ...any)
}

// Check measures a over pkgs, logs the counts, and fails unless the
// corpus holds at least 10 findings and 10 near misses and a reports
// every finding and no near miss.
func Check(t T, a *analysis.Analyzer, pkgs ...string) {
	c, err := Measure(Dir(t), a, pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %v", a.Name, c)
	if c.Wanted < 10 || c.NearMisses < 10 {
		t.Fatalf("%s: corpus too small: %v", a.Name, c)
	}
	if c.FP != 0 || c.FN != 0 || c.TP != c.Wanted {
		t.Fatalf("%s: %v", a.Name, c)
	}
}
