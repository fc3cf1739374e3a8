package redisstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// micros returns t in Unix microseconds, the unit of every time the store
// keeps (as PostgreSQL does). Below 2^53 (the year 2255) they are exact in
// the doubles of Lua and of sorted-set scores.
func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// version is a record's version in the pending index: its index epoch and
// its count of writes.
type version struct{ epoch, seq int64 }

func (v version) String() string {
	return strconv.FormatInt(v.epoch, 10) + ":" + strconv.FormatInt(v.seq, 10)
}

// less reports whether v is older than w.
func (v version) less(w version) bool {
	return v.epoch < w.epoch || (v.epoch == w.epoch && v.seq < w.seq)
}

// parseVersion parses "epoch:seq"; ok is false for "" (no version).
func parseVersion(s string) (v version, ok bool, err error) {
	if s == "" {
		return version{}, false, nil
	}
	e, q, found := strings.Cut(s, ":")
	if !found {
		return version{}, false, fmt.Errorf("redisstore: version %q", s)
	}
	if v.epoch, err = strconv.ParseInt(e, 10, 64); err == nil {
		v.seq, err = strconv.ParseInt(q, 10, 64)
	}
	if err != nil {
		return version{}, false, fmt.Errorf("redisstore: version %q: %w", s, err)
	}
	return v, true, nil
}

// stored is a record as read from its hash, with its index version.
type stored struct {
	rec *idem.Record
	ver version
}

// decodeRecord decodes a record's hash from HGETALL's flat reply; nil
// for an empty reply (no record).
func decodeRecord(reply any) (*stored, error) {
	flat, ok := reply.([]any)
	if !ok || len(flat)%2 != 0 {
		return nil, fmt.Errorf("redisstore: a record's reply is %T", reply)
	}
	if len(flat) == 0 {
		return nil, nil
	}
	f := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		f[k] = v
	}
	return recordFromFields(f)
}

// recordFromFields decodes a record's hash fields.
func recordFromFields(f map[string]string) (*stored, error) {
	var firstErr error
	num := func(name string) int64 {
		v, err := strconv.ParseInt(f[name], 10, 64)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("redisstore: record field %s = %q: %w", name, f[name], err)
		}
		return v
	}
	at := func(name string) time.Time { return time.UnixMicro(num(name)).UTC() }
	r := &idem.Record{
		Scope: f["s"], Key: f["k"], Fingerprint: f["fp"], State: idem.State(f["st"]),
		CreatedAt: at("cr"), ExpiresAt: at("ex"), Token: num("tok"), LeaseUntil: at("lu"),
		Kind: f["kind"], Input: []byte(f["in"]), Attempts: int(num("att")), LastError: f["err"],
	}
	if _, ok := f["ttl"]; ok { // absent on records claimed before it was kept
		r.TTL = time.Duration(num("ttl")) * time.Microsecond
	}
	if r.State != idem.StatePending && r.State != idem.StateCompleted {
		return nil, fmt.Errorf("redisstore: record of key_sha256 %s has state %q", idem.KeyHash(r.Key), r.State)
	}
	if r.State == idem.StateCompleted {
		r.Result.Status = int(num("rs"))
		r.Result.Body = []byte(f["rb"])
		h, err := decodeHeader(f["rh"])
		if err != nil && firstErr == nil {
			firstErr = err
		}
		r.Result.Header = h
	}
	v := version{epoch: num("ie"), seq: num("seq")}
	if firstErr != nil {
		return nil, firstErr
	}
	return &stored{rec: r, ver: v}, nil
}

// encodeHeader encodes headers as bytes, names sorted: for each name, its
// length and bytes, the count of its values, and each value's length and
// bytes (lengths as uvarints). No header encodes as "".
func encodeHeader(h map[string][]string) string {
	if len(h) == 0 {
		return ""
	}
	var b []byte
	for _, name := range slices.Sorted(maps.Keys(h)) {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, uint64(len(h[name])))
		for _, v := range h[name] {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return string(b)
}

var errHeader = errors.New("redisstore: malformed result headers")

func decodeHeader(s string) (map[string][]string, error) {
	if s == "" {
		return nil, nil
	}
	b := []byte(s)
	next := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		v := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return v, true
	}
	count := func() (int, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return 0, false
		}
		b = b[k:]
		return int(n), true
	}
	h := make(map[string][]string)
	for len(b) > 0 {
		name, ok := next()
		if !ok {
			return nil, errHeader
		}
		n, ok := count()
		if !ok {
			return nil, errHeader
		}
		vs := make([]string, 0, n)
		for range n {
			v, ok := next()
			if !ok {
				return nil, errHeader
			}
			vs = append(vs, v)
		}
		h[name] = vs
	}
	return h, nil
}
