package batch

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/idemkit/idem"
)

// keyDigestPrefix starts a key that is a digest (see Key). A plain key
// starts with a digit, so the two forms never meet.
const keyDigestPrefix = "sha256/"

// Key returns the idempotency key of item itemID of batch batchID: the
// length of batchID in decimal, "/", batchID, "/", itemID (for example
// "7/2026-05/row-1"), when that is a valid key (1 to 255 visible ASCII
// characters; see idem.ValidateKey); otherwise "sha256/" and the hex
// SHA-256 of that same string. The length prefix keeps the two ids apart
// whatever they contain, so two different (batch, item) pairs never share
// a key. Tools that look an item's record up (idem inspect) take this key
// and the batch's Config.Scope.
func Key(batchID, itemID string) string {
	plain := strconv.Itoa(len(batchID)) + "/" + batchID + "/" + itemID
	if idem.ValidateKey(plain) == nil {
		return plain
	}
	sum := sha256.Sum256([]byte(plain))
	return keyDigestPrefix + hex.EncodeToString(sum[:])
}

// fingerprint identifies an item's content, so that an id reused with
// other content is told apart from a re-run.
func fingerprint(body []byte) string {
	sum := sha256.Sum256(body)
	return "batch-v1:" + strconv.Itoa(len(body)) + ":" + hex.EncodeToString(sum[:])
}
