package idem

import (
	"context"
	"encoding/json"
	"fmt"
)

// callContentType is the Content-Type recorded with a Call's result.
const callContentType = "application/json"

// Call runs fn once per (req.Scope, req.Key), as Guard.Do runs a Work, and
// returns its typed result: on the first execution fn's own value, on a
// replay the recorded one. The result is recorded as its JSON encoding
// (encoding/json), with Status 200, so T must survive a round trip
// through JSON (exported fields, no channels or functions), and a replay
// returns what decoding the recording gives.
//
// The guarantees and errors are Guard.Do's: fn runs in the store's
// transaction (ctx carries it; see TxFrom), its effect and the recorded
// result commit together, and an error from fn (or a result that cannot
// be encoded) rolls both back and records nothing. A recorded result that
// does not decode into T (a record that another caller wrote under the
// key, or T changed) is an error, and fn does not run.
//
// req.Fingerprint detects a key reused for another call: give it
// InputFingerprint of the operation and its input, so that a retry with
// other arguments is refused with ErrMismatch.
func Call[T any](ctx context.Context, g *Guard, req Request, fn func(ctx context.Context) (T, error)) (out T, replayed bool, err error) {
	if fn == nil {
		return out, false, fmt.Errorf("idem: Call: fn is nil")
	}
	var ran bool
	res, replayed, err := g.Do(ctx, req, func(ctx context.Context) (Result, error) {
		v, err := fn(ctx)
		if err != nil {
			return Result{}, err
		}
		body, err := json.Marshal(v)
		if err != nil {
			return Result{}, fmt.Errorf("idem: Call: encoding the result: %w", err)
		}
		out, ran = v, true
		return Result{Status: 200, Header: map[string][]string{"Content-Type": {callContentType}}, Body: body}, nil
	})
	if err != nil {
		var zero T
		return zero, false, err
	}
	if ran && !replayed {
		return out, false, nil
	}
	if err := json.Unmarshal(res.Body, &out); err != nil {
		var zero T
		return zero, replayed, fmt.Errorf("idem: Call: the recorded result does not decode into %T: %w", zero, err)
	}
	return out, replayed, nil
}

// InputFingerprint returns the fingerprint of a call to op with input, for
// Request.Fingerprint: input is encoded as JSON (encoding/json) and
// compared in its canonical form (see CanonicalJSON), so that two inputs
// equal as JSON values fingerprint alike whatever their member order. op
// names the operation, as a route does, so that one key used for two
// operations is a mismatch.
func InputFingerprint(op string, input any) (string, error) {
	body, err := json.Marshal(input)
	if err != nil {
		return "", fmt.Errorf("idem: InputFingerprint: %w", err)
	}
	return NewFingerprint(FingerprintInput{Method: "CALL", Route: op, Body: body, JSON: true}), nil
}
