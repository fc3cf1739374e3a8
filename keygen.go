package idem

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// RandomKey returns a new key made of 128 random bits from crypto/rand,
// written as 32 lowercase hexadecimal characters. A client makes one when
// an intent is made and keeps it for every attempt (docs/DESIGN.md C1); a
// server never makes up a client's key (K1).
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
	var h [32]byte
	hex.Encode(h[:], u[:])
	b := make([]byte, 0, 36)
	b = append(b, h[0:8]...)
	b = append(b, '-')
	b = append(b, h[8:12]...)
	b = append(b, '-')
	b = append(b, h[12:16]...)
	b = append(b, '-')
	b = append(b, h[16:20]...)
	b = append(b, '-')
	b = append(b, h[20:32]...)
	return string(b)
}
