package batch

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/idemkit/idem"
)

// ErrRefused matches an error made with Refuse.
var ErrRefused = errors.New("batch: item refused")

// Refuse marks err as a final refusal of an item: it can never succeed as
// it is (an unknown account, insufficient funds). Returned by the work,
// it has Run roll back whatever the work wrote and record the refusal
// alone, with err's text as its reason, under the item's key, so that a
// re-run replays the refusal instead of running the item again. The result
// matches ErrRefused and err with errors.Is. A nil err is refused as
// "refused".
func Refuse(err error) error {
	if err == nil {
		err = errors.New("refused")
	}
	return &refusal{err}
}

type refusal struct{ err error }

func (r *refusal) Error() string   { return "batch: item refused: " + r.err.Error() }
func (r *refusal) Unwrap() []error { return []error{ErrRefused, r.err} }

// StatusRefused is the status of the record of an item refused with
// Refuse; its body is the reason.
const StatusRefused = 422

// maxReason bounds a recorded refusal's reason, in bytes.
const maxReason = 1024

// cut returns s cut to maxReason bytes on a character boundary.
func cut(s string) string {
	if len(s) <= maxReason {
		return s
	}
	n := maxReason
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// resultReason is the reason of a refusal recorded as a Result: its body
// when it is text, otherwise its status.
func resultReason(res idem.Result) string {
	if len(res.Body) > 0 && utf8.Valid(res.Body) {
		return cut(string(res.Body))
	}
	return "status " + strconv.Itoa(res.Status)
}
