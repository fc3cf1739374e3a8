package redisstore

import (
	"hash/crc32"
	"strconv"
	"strings"
)

// The keys of one record share a Redis Cluster hash tag (the text between
// the first '{' and the next '}'), so they live in one hash slot and one
// script may touch them all:
//
//	{<prefix>:<n>:<scope>:<key>}:rec    the record (a hash)
//	{<prefix>:<n>:<scope>:<key>}:steps  step name -> output (a hash)
//	{<prefix>:<n>:<scope>:<key>}:order  step names in the order saved (a list)
//
// where scope and key are escaped ('%', '{' and '}' as %25, %7B, %7D, so
// that no '}' ends the tag early) and n is the length of the escaped
// scope, so that distinct (scope, key) pairs never share a name. The text
// inside the braces is the record's member in the pending index.
//
// The pending index is split in Config.PendingIndexes parts, part i in the
// slot of its own tag:
//
//	{<prefix>:pending:<i>}        member -> LeaseUntil (a sorted set)
//	{<prefix>:pending:<i>}:ver    member -> "epoch:seq" (a hash)
//	{<prefix>:pending:<i>}:epoch  a counter
//
// No member is "<prefix>:pending:...": a member's second part is digits.

var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// member returns the name of (scope, key): its keys' hash tag and its
// member in the pending index.
func (s *Store) member(scope, key string) string {
	es := escaper.Replace(scope)
	return s.cfg.Prefix + ":" + strconv.Itoa(len(es)) + ":" + es + ":" + escaper.Replace(key)
}

// recordKeys returns the keys of the record named m: the record, its
// steps and their order.
func recordKeys(m string) []string {
	tag := "{" + m + "}"
	return []string{tag + ":rec", tag + ":steps", tag + ":order"}
}

// indexOf returns the part of the pending index that holds member m.
func (s *Store) indexOf(m string) int {
	return int(crc32.ChecksumIEEE([]byte(m)) % uint32(s.cfg.PendingIndexes))
}

// indexKeys returns the keys of part i of the pending index: the sorted
// set, the versions and the epoch counter.
func (s *Store) indexKeys(i int) []string {
	tag := "{" + s.cfg.Prefix + ":pending:" + strconv.Itoa(i) + "}"
	return []string{tag, tag + ":ver", tag + ":epoch"}
}
