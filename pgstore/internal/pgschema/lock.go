package pgschema

import (
	"encoding/binary"
	"hash/fnv"
)

// LockKey is the advisory lock key of (scope, key) on the table whose
// quoted qualified name is table (Names.Table): FNV-1a 64 over the table
// name, scope and key, each prefixed by its length as a big-endian uint32
// so that no two triples share an input.
//
// It only ever locks; what a request is answered is decided by the stored
// (scope, key), so a collision costs a spurious in-flight refusal and
// nothing else. Every store on the table must compute the same key, or
// two of them could run the same key at once: it never changes.
func LockKey(table, scope, key string) int64 {
	h := fnv.New64a()
	var n [4]byte
	for _, part := range [...]string{table, scope, key} {
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return int64(h.Sum64())
}
