package main

import (
	"fmt"

	"github.com/idemkit/idem/idemwebhook"
)

// secretFlags is the repeatable -webhook-secret. Its String never shows a
// secret: the flag package prints it in the usage, and nothing else may.
type secretFlags []string

func (s *secretFlags) String() string {
	if s == nil || len(*s) == 0 {
		return ""
	}
	return fmt.Sprintf("%d secrets", len(*s))
}

// Set validates a Standard Webhooks secret without quoting it.
func (s *secretFlags) Set(v string) error {
	if _, err := idemwebhook.StandardKey(v); err != nil {
		return fmt.Errorf("not a Standard Webhooks secret (whsec_ and base64)")
	}
	*s = append(*s, v)
	return nil
}

const webhookSecretUsage = "serve POST /webhooks/deposits, deposits signed with Standard Webhooks under this secret (whsec_…); repeat it to accept the old and the new secret while rotating. Never logged"
