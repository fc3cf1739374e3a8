// Command idemvet is a static analyzer for the common errors that make
// idempotency exist only on paper (docs/IDEMVET.md): a key made per
// attempt instead of per intent, an effect written outside the guard's
// transaction, a call the transaction cannot roll back inside atomic-mode
// work, a server that makes up its clients' keys, and a retried POST
// without a key.
//
// Run it standalone or as a vet tool:
//
//	idemvet ./...
//	go vet -vettool=$(which idemvet) ./...
//
// A finding made on purpose is silenced by a comment on its line or the
// line above: //idemvet:ignore <reason>.
package main

import (
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/idemkit/idem/cmd/idemvet/internal/analyzers"
)

func main() { multichecker.Main(analyzers.All()...) }
