package redisstore

import (
	"maps"
	"slices"
	"testing"
	"time"
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

// A record's TTL is read from its ttl field; a record claimed before the
// field was kept has none and reads with TTL 0 ("unknown"), not an error.
func TestRecordTTLField(t *testing.T) {
	t.Parallel()
	base := map[string]string{"s": "s", "k": "k", "fp": "fp", "st": "pending", "cr": "1", "ex": "2", "tok": "3",
		"lu": "4", "att": "1", "ie": "1", "seq": "1"}
	for _, tt := range []struct {
		name  string
		field *string
		want  time.Duration
	}{
		{"Absent", nil, 0},
		{"Zero", new("0"), 0},
		{"SevenDays", new("604800000000"), 7 * 24 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := maps.Clone(base)
			if tt.field != nil {
				f["ttl"] = *tt.field
			}
			st, err := recordFromFields(f)
			if err != nil {
				t.Fatalf("recordFromFields: %v", err)
			}
			if got := st.rec.TTL; got != tt.want {
				t.Errorf("TTL = %s, want %s", got, tt.want)
			}
		})
	}
	f := maps.Clone(base)
	f["ttl"] = "x"
	if _, err := recordFromFields(f); err == nil {
		t.Error("a malformed ttl field decoded without an error")
	}
}
