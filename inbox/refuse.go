package inbox

import (
	"errors"
	"unicode/utf8"
)

// Errors of Process.
var (
	// ErrRefused matches an error made with Refuse.
	ErrRefused = errors.New("inbox: message refused")

	// ErrNoID means the message had no id: nothing could tell its
	// redelivery from a new message, so it is dead-lettered.
	ErrNoID = errors.New("inbox: message has no id")

	// ErrConflict means the message's id already took effect, or was
	// refused, with another body: a producer reused an id.
	ErrConflict = errors.New("inbox: message id already used with another body")
)

// Refuse marks err as a final refusal: the message can never succeed
// (malformed, or refused by the business rules), so Process rolls back
// whatever the handler wrote, records the refusal with the id and returns
// Refused: the message is settled, never delivered again. The result
// matches ErrRefused and err with errors.Is. A nil err is refused as
// "refused".
func Refuse(err error) error {
	if err == nil {
		err = errors.New("refused")
	}
	return &refusal{err}
}

type refusal struct{ err error }

func (r *refusal) Error() string   { return "inbox: message refused: " + r.err.Error() }
func (r *refusal) Unwrap() []error { return []error{ErrRefused, r.err} }

// maxReason bounds the refusal reason recorded with an id, in bytes.
const maxReason = 1024

// reason is what is recorded of a refusal: its text, cut to maxReason
// bytes on a character boundary.
func reason(err error) []byte {
	s := err.Error()
	if len(s) > maxReason {
		cut := maxReason
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return []byte(s)
}
