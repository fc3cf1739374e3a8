package idemclient

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// RandomKey returns a new key made of 128 random bits from crypto/rand,
// written as 32 lowercase hexadecimal characters. It is the default key
// generator.
func RandomKey() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// UUIDv7Key returns a new RFC 9562 version 7 UUID in its 36-character text
// form: a 48-bit Unix millisecond timestamp followed by 74 random bits.
// Keys made by it sort roughly by creation time, which some server stores
// index better than random keys.
func UUIDv7Key() string {
	return uuidV7(time.Now())
}

func uuidV7(now time.Time) string {
	var u [16]byte
	rand.Read(u[6:])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var b strings.Builder
	h := hex.EncodeToString(u[:])
	b.WriteString(h[0:8])
	b.WriteByte('-')
	b.WriteString(h[8:12])
	b.WriteByte('-')
	b.WriteString(h[12:16])
	b.WriteByte('-')
	b.WriteString(h[16:20])
	b.WriteByte('-')
	b.WriteString(h[20:32])
	return b.String()
}

// headerValue returns the Idempotency-Key field value for key: the rule
// of idem.FormatKey (bare when idem.ParseKey reads the bare key back
// unchanged, an sf-string otherwise), or always an sf-string with quote set.
func headerValue(key string, quote bool) string {
	if quote {
		return idem.QuoteKey(key)
	}
	return idem.FormatKey(key)
}
