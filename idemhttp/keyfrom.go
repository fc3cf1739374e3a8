package idemhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpwire"
)

// KeySource names where, besides Config.Header, a route finds a request's
// key: for clients that cannot send that header. Set one of its fields;
// the zero value means Config.Header only.
//
// A request may carry its key in Config.Header, in the source, or in both
// when the two are the same key; two different keys are refused with 400
// conflicting-keys. A request with neither has no key: it is refused with
// 400 missing-key, or runs unprotected on an Optional route. The key is
// scoped and fingerprinted as a header's is (the body, key member included,
// is in the fingerprint), and it follows the same rules: 1 to 255 visible
// ASCII characters, or 400 invalid-key.
type KeySource struct {
	// Header is a request header other than Config.Header that carries the
	// key, in the same syntax: an sf-string or a bare token.
	Header string

	// JSON is a JSON Pointer (RFC 6901), such as "/payment/reference", to the body member that
	// carries the key: a JSON string, or a number whose literal text is
	// the key. A body that is not JSON, a pointer that reaches nothing and
	// a null member all mean that the body carries no key; a member of any
	// other type is an invalid key. Whatever the Content-Type, the body is
	// read as JSON to find it.
	JSON string
}

// keySource is a checked KeySource.
type keySource struct {
	header  string   // canonical header name, or ""
	pointer []string // the JSON Pointer's reference tokens, unescaped; nil if none
	json    string   // the pointer as given, for problem details
}

// checkKeySource panics if o.KeyFrom is not a source m can read.
func checkKeySource(m *Middleware, o RouteOptions) keySource {
	s := o.KeyFrom
	switch {
	case s.Header != "" && s.JSON != "":
		panic("idemhttp: RouteOptions.KeyFrom: set Header or JSON, not both")
	case s.Header != "":
		if !httpwire.IsToken(s.Header) {
			panic(fmt.Sprintf("idemhttp: RouteOptions.KeyFrom.Header: %q is not a header name", s.Header))
		}
		h := http.CanonicalHeaderKey(s.Header)
		if h == m.cfg.Header {
			panic(fmt.Sprintf("idemhttp: RouteOptions.KeyFrom.Header: %s is already Config.Header", h))
		}
		return keySource{header: h}
	case s.JSON != "":
		tokens, err := parsePointer(s.JSON)
		if err != nil {
			panic(fmt.Sprintf("idemhttp: RouteOptions.KeyFrom.JSON: %v", err))
		}
		return keySource{pointer: tokens, json: s.JSON}
	}
	return keySource{}
}

// parsePointer splits a JSON Pointer (RFC 6901) into its unescaped
// reference tokens. The empty pointer, the whole document, is refused: a
// key is a member of the body, not the body.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("%q is not a JSON Pointer: it must start with \"/\"", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, part := range parts {
		for j := 0; j < len(part); j++ {
			if part[j] == '~' && (j+1 == len(part) || (part[j+1] != '0' && part[j+1] != '1')) {
				return nil, fmt.Errorf("%q is not a JSON Pointer: \"~\" must be followed by 0 or 1", p)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

var errNotKeyType = errors.New("the member is neither a string nor a number")

// bodyKey returns the key at pointer in body, and whether there is one.
func bodyKey(body []byte, pointer []string) (key string, present bool, err error) {
	raw := json.RawMessage(body)
	for _, tok := range pointer {
		var ok bool
		if raw, ok = member(raw, tok); !ok {
			return "", false, nil
		}
	}
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", false, nil
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &key); err != nil {
			return "", false, nil
		}
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		key = string(raw)
	default:
		return "", true, fmt.Errorf("%w: %w", idem.ErrInvalidKey, errNotKeyType)
	}
	return key, true, idem.ValidateKey(key)
}

// member returns the value that tok addresses in the JSON value raw: an
// object's member (the last of that name, as encoding/json decodes it) or
// an array's element. false if raw is not JSON or has no such member.
func member(raw json.RawMessage, tok string) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	switch raw[0] {
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil, false
		}
		v, ok := obj[tok]
		return v, ok
	case '[':
		if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.Trim(tok, "0123456789") != "" {
			return nil, false
		}
		i, err := strconv.Atoi(tok)
		if err != nil {
			return nil, false
		}
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil || i >= len(arr) {
			return nil, false
		}
		return arr[i], true
	}
	return nil, false
}
