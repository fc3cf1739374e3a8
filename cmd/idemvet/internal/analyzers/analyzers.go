// Package analyzers lists idemvet's analyzers.
package analyzers

import (
	"golang.org/x/tools/go/analysis"
)

// All returns every analyzer idemvet runs, in the order docs/IDEMVET.md
// lists them.
func All() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		// Added by their packages: keyperattempt, effectoutsidetx,
		// foreigneffect, serverkey, retrywithoutkey.
	}
}
