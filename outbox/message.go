package outbox

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Message is one message to stage.
type Message struct {
	// Name names the message within its intent: with the intent's scope
	// and key it makes the message's id (see ID). Two messages of one
	// intent need two names. Required: 1 to 255 bytes of valid UTF-8
	// without control characters.
	Name string
	// Subject is where the publisher sends the message (a NATS subject, an
	// AMQP routing key). Empty means the publisher's default.
	Subject string
	// Body is the payload.
	Body []byte
	// Headers are sent with the message. Names must be non-empty and
	// valid UTF-8 without control characters; values must not hold NUL.
	Headers map[string]string
	// PartitionKey orders messages: a relay publishes the messages of one
	// partition key in the order they were staged (docs/OUTBOX.md,
	// "Order"). Empty means no order with any other message.
	PartitionKey string
}

// MaxNameLen is the longest Message.Name, in bytes.
const MaxNameLen = 255

// ID returns the id of the message called name of the intent (scope, key):
// "msg_" and 32 lowercase base32 characters of a SHA-256 digest of the
// three, each length-prefixed. It is deterministic, so every execution of
// an intent stages the same id, and reveals neither the scope nor the key.
// scope is the stored scope (idem.StoredScope), as the store records it.
func ID(scope, key, name string) string {
	h := sha256.New()
	h.Write([]byte("idem outbox id v1"))
	var n [binary.MaxVarintLen64]byte
	for _, s := range []string{scope, key, name} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	sum := h.Sum(nil)
	return "msg_" + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:20]))
}

// Staged is a message as Stage hands it to a store: the Message with its
// intent and id.
type Staged struct {
	ID         string
	Scope, Key string
	Message
}

// Envelope is a message as the relay hands it to a Publisher.
type Envelope struct {
	// ID is the message's id (see ID): the same on every publish of the
	// message. Publishers send it as the broker's message id
	// (Nats-Msg-Id, AMQP message-id), for the broker's and the consumer's
	// deduplication.
	ID           string
	Subject      string
	Body         []byte
	Headers      map[string]string
	PartitionKey string
	// Attempt is 1 plus the number of failed publishes recorded for the
	// message. A publish confirmed by the broker whose mark was lost (a
	// crash) is not counted: the same id is published again with the
	// same Attempt.
	Attempt int
}

func checkText(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("outbox: %s is empty", what)
	case max > 0 && len(s) > max:
		return fmt.Errorf("outbox: %s is longer than %d bytes", what, max)
	case !utf8.ValidString(s):
		return fmt.Errorf("outbox: %s is not valid UTF-8", what)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }):
		return fmt.Errorf("outbox: %s %q holds a control character", what, s)
	}
	return nil
}

func (m *Message) check() error {
	if err := checkText("Message.Name", m.Name, MaxNameLen); err != nil {
		return err
	}
	if m.Subject != "" {
		if err := checkText("Message.Subject", m.Subject, 0); err != nil {
			return err
		}
	}
	if !utf8.ValidString(m.PartitionKey) || strings.ContainsRune(m.PartitionKey, 0) {
		return fmt.Errorf("outbox: Message.PartitionKey of %q is not valid UTF-8 without NUL", m.Name)
	}
	for k, v := range m.Headers {
		if err := checkText("header name", k, 0); err != nil {
			return err
		}
		if strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
			return fmt.Errorf("outbox: header %q of %q is not valid UTF-8 without NUL", k, m.Name)
		}
	}
	return nil
}
