package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
)

// keyDigestPrefix starts the key of a message id that is not a valid
// idempotency key as it stands.
const keyDigestPrefix = "sha256:"

// Key returns the idempotency key a message id is recorded under: the id
// itself when it is a valid key (1 to 255 visible ASCII characters; see
// idem.ValidateKey) that does not start with "sha256:", otherwise
// "sha256:" and the hex SHA-256 of the id. Two different ids never share a
// key. Tools that look an inbox record up (idem inspect) take this key and
// the scope Inbox.Scope.
func Key(id string) string {
	if idem.ValidateKey(id) == nil && !strings.HasPrefix(id, keyDigestPrefix) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return keyDigestPrefix + hex.EncodeToString(sum[:])
}

// fingerprint identifies a message's body, so that an id reused for another
// body is told apart from a redelivery.
func fingerprint(body []byte) string {
	sum := sha256.Sum256(body)
	return "inbox-v1:" + strconv.Itoa(len(body)) + ":" + hex.EncodeToString(sum[:])
}

// redact returns msg with the message id replaced by the digest that log
// lines name the message by (key_sha256, see Config.Logger).
func redact(msg, id string) string {
	if id == "" {
		return msg
	}
	return strings.ReplaceAll(msg, id, "key_sha256:"+idem.KeyHash(Key(id)))
}
