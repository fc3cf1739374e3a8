package idemclient

import "github.com/idemkit/idem"

// headerValue returns the Idempotency-Key field value for key: the rule
// of idem.FormatKey (bare when idem.ParseKey reads the bare key back
// unchanged, an sf-string otherwise), or always an sf-string with quote set.
func headerValue(key string, quote bool) string {
	if quote {
		return idem.QuoteKey(key)
	}
	return idem.FormatKey(key)
}
