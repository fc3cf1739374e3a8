package idemwebhook

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Encoding is how a generic HMAC signature is written in its header.
type Encoding int

// Encodings of HMACConfig.Encoding.
const (
	Hex    Encoding = iota // lower- or upper-case hex
	Base64                 // standard base64, with padding
)

// Signed says what a generic HMAC signature covers.
type Signed int

// Values of HMACConfig.Signed.
const (
	// SignedBody: the body alone.
	SignedBody Signed = iota
	// SignedTimestampBody: "<timestamp>.<body>".
	SignedTimestampBody
	// SignedIDTimestampBody: "<id>.<timestamp>.<body>".
	SignedIDTimestampBody
)

// HMACConfig describes a provider's HMAC-SHA256 scheme for NewHMAC.
type HMACConfig struct {
	// Provider names the provider. Required.
	Provider string
	// Secrets are the HMAC keys, as bytes; a signature made with any of
	// them is accepted. At least one is required.
	Secrets []string
	// SignatureHeader carries the signature. Required.
	SignatureHeader string
	// Prefix starts the signature's value, such as "sha256="; it is
	// required when set. Defaults to none.
	Prefix string
	// Encoding of the signature. Defaults to Hex.
	Encoding Encoding
	// IDHeader carries the delivery id. Required.
	IDHeader string
	// TimestampHeader carries the time of signing in Unix seconds, which
	// Config.Tolerance bounds. Required by the Signed forms that include
	// it; defaults to none (no timestamp checked).
	TimestampHeader string
	// Signed is what the signature covers. Defaults to SignedBody.
	Signed Signed
}

// HMAC verifies a configurable HMAC-SHA256 scheme.
type HMAC struct {
	cfg  HMACConfig
	keys [][]byte
}

// NewHMAC returns a verifier of the scheme cfg describes.
func NewHMAC(cfg HMACConfig) (*HMAC, error) {
	switch {
	case cfg.Provider == "":
		return nil, errors.New("idemwebhook: HMACConfig.Provider is required")
	case len(cfg.Secrets) == 0:
		return nil, noSecrets("HMAC")
	case cfg.SignatureHeader == "" || cfg.IDHeader == "":
		return nil, errors.New("idemwebhook: HMACConfig.SignatureHeader and IDHeader are required")
	case cfg.Signed != SignedBody && cfg.TimestampHeader == "":
		return nil, errors.New("idemwebhook: HMACConfig.Signed covers a timestamp, so TimestampHeader is required")
	case cfg.Encoding != Hex && cfg.Encoding != Base64:
		return nil, fmt.Errorf("idemwebhook: HMACConfig.Encoding %d is not Hex or Base64", cfg.Encoding)
	case cfg.Signed < SignedBody || cfg.Signed > SignedIDTimestampBody:
		return nil, fmt.Errorf("idemwebhook: HMACConfig.Signed %d is unknown", cfg.Signed)
	}
	v := &HMAC{cfg: cfg}
	for i, s := range cfg.Secrets {
		if s == "" {
			return nil, fmt.Errorf("idemwebhook: HMACConfig.Secrets[%d] is empty", i)
		}
		v.keys = append(v.keys, []byte(s))
	}
	return v, nil
}

// Provider implements Verifier.
func (v *HMAC) Provider() string { return v.cfg.Provider }

// Verify implements Verifier.
func (v *HMAC) Verify(h http.Header, body []byte) (Delivery, error) {
	c := &v.cfg
	sig := h.Get(c.SignatureHeader)
	if sig == "" {
		return Delivery{}, Reject(ReasonMissingSignature, c.SignatureHeader+" is required")
	}
	enc, ok := strings.CutPrefix(sig, c.Prefix)
	if !ok {
		return Delivery{}, Reject(ReasonMalformedSignature, c.SignatureHeader+" must start with "+c.Prefix)
	}
	mac, err := v.decode(enc)
	if err != nil {
		return Delivery{}, Reject(ReasonMalformedSignature, c.SignatureHeader+" cannot be decoded")
	}
	id := h.Get(c.IDHeader)
	var d Delivery
	var ts string
	if c.TimestampHeader != "" {
		ts = h.Get(c.TimestampHeader)
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return Delivery{}, Reject(ReasonMalformedSignature, c.TimestampHeader+" must be whole seconds since 1970")
		}
		d.Timestamp = time.Unix(sec, 0)
	}
	if !anyMatch(v.expected(id, ts, body), [][]byte{mac}) {
		return Delivery{}, errBadSignature()
	}
	if id == "" {
		return Delivery{}, Reject(ReasonMissingID, c.IDHeader+" is required")
	}
	d.ID = id
	return d, nil
}

func (v *HMAC) decode(s string) ([]byte, error) {
	if v.cfg.Encoding == Base64 {
		return base64.StdEncoding.DecodeString(s)
	}
	return hex.DecodeString(s)
}

func (v *HMAC) expected(id, ts string, body []byte) [][]byte {
	out := make([][]byte, len(v.keys))
	for i, k := range v.keys {
		switch v.cfg.Signed {
		case SignedTimestampBody:
			out[i] = hmacSHA256(k, []byte(ts), []byte{'.'}, body)
		case SignedIDTimestampBody:
			out[i] = hmacSHA256(k, []byte(id), []byte{'.'}, []byte(ts), []byte{'.'}, body)
		default:
			out[i] = hmacSHA256(k, body)
		}
	}
	return out
}

// Sign returns the signature header's value for a delivery, made with the
// first secret, for senders and tests.
func (v *HMAC) Sign(id string, ts time.Time, body []byte) string {
	t := ""
	if v.cfg.TimestampHeader != "" {
		t = strconv.FormatInt(ts.Unix(), 10)
	}
	mac := v.expected(id, t, body)[0]
	if v.cfg.Encoding == Base64 {
		return v.cfg.Prefix + base64.StdEncoding.EncodeToString(mac)
	}
	return v.cfg.Prefix + hex.EncodeToString(mac)
}
