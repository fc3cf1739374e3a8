// Package idem is a stub of idem's root package for idemvet's tests.
package idem

func RandomKey() string { return "" }
func UUIDv7Key() string { return "" }

type Request struct{ Scope, Key, Fingerprint string }

type LeasedRequest struct{ Scope, Key, Fingerprint, Kind string }

type BeginParams struct{ Scope, Key string }

type ClaimParams struct{ Scope, Key, Fingerprint string }

type Result struct{ Status int }

type Guard struct{}

func (g *Guard) Do(req Request, work func() (Result, error)) (Result, bool, error) {
	return Result{}, false, nil
}
func ParseKey(field string) (string, error) { return field, nil }
