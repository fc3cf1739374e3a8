package redisstore

import (
	"maps"
	"slices"
	"testing"
)

func TestHeaderEncodingRoundTrips(t *testing.T) {
	for _, h := range []map[string][]string{
		nil,
		{"A": {"1"}},
		{"Location": {"/x"}, "X-Multi": {"a", "b, c"}, "X-Empty": {""}, "X-None": {}},
		{"Bin": {"\x00\xff\r\n", string(make([]byte, 300))}},
	} {
		got, err := decodeHeader(encodeHeader(h))
		if err != nil {
			t.Fatalf("decode(encode(%q)): %v", h, err)
		}
		if len(h) == 0 && len(got) == 0 {
			continue
		}
		if !maps.EqualFunc(got, h, slices.Equal[[]string]) {
			t.Errorf("decode(encode(%q)) = %q", h, got)
		}
	}
	for _, bad := range []string{"\x05ab", "\x01A\x02\x01x", "\xff"} {
		if _, err := decodeHeader(bad); err == nil {
			t.Errorf("decodeHeader(%q) succeeded, want an error", bad)
		}
	}
}

func TestMembersAreDistinctAndKeepTheirTag(t *testing.T) {
	s, err := New(nil, nil)
	if err == nil || s != nil {
		t.Fatal("New(nil) succeeded")
	}
	s = &Store{}
	s.cfg, _ = (*Config)(nil).withDefaults()
	pairs := [][2]string{
		{"a:b", "c"}, {"a", "b:c"}, {"{", "}"}, {"%7B", "%7D"}, {"", "{x}"}, {"{x}", ""}, {"1:a", ""}, {"", "1:a"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		m := s.member(p[0], p[1])
		if q, dup := seen[m]; dup {
			t.Errorf("%q and %q share the member %q", p, q, m)
		}
		seen[m] = p
		for _, k := range recordKeys(m) {
			if got := hashTag(k); got != m {
				t.Errorf("key %q of %q has the hash tag %q, want %q: its keys would not share a slot", k, p, got, m)
			}
		}
	}
}

// hashTag returns what Redis Cluster hashes of key: the text between the
// first '{' and the next '}', when not empty, or the whole key.
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						return key[i+1 : j]
					}
					return key
				}
			}
			return key
		}
	}
	return key
}
