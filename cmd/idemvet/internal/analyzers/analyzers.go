// Package analyzers lists idemvet's analyzers.
package analyzers

import (
	"golang.org/x/tools/go/analysis"

	"github.com/idemkit/idem/cmd/idemvet/internal/effectoutsidetx"
	"github.com/idemkit/idem/cmd/idemvet/internal/foreigneffect"
	"github.com/idemkit/idem/cmd/idemvet/internal/keyperattempt"
	"github.com/idemkit/idem/cmd/idemvet/internal/retrywithoutkey"
	"github.com/idemkit/idem/cmd/idemvet/internal/serverkey"
)

// All returns every analyzer idemvet runs, in the order docs/IDEMVET.md
// lists them.
func All() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		keyperattempt.Analyzer,
		effectoutsidetx.Analyzer,
		foreigneffect.Analyzer,
		serverkey.Analyzer,
		retrywithoutkey.Analyzer,
	}
}
