package idem_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "idem:sha256:" + hex.EncodeToString(sum[:])
}

func TestStoredScope(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3000)
	defaultScope := "sha256:" + strings.Repeat("ab", 32) // idemhttp.DefaultScope's form
	tests := []struct {
		name, scope, want string
	}{
		{"Empty", "", ""},
		{"Principal", "user:42", "user:42"},
		{"DefaultScopeForm", defaultScope, defaultScope},
		{"UTF8", "tenant/café-😀", "tenant/café-😀"},
		{"Spaces", "a b", "a b"},
		{"MaxLength", strings.Repeat("s", 255), strings.Repeat("s", 255)},
		{"MaxLengthMultiByte", strings.Repeat("é", 127), strings.Repeat("é", 127)},
		{"TooLong", strings.Repeat("s", 256), digestOf(strings.Repeat("s", 256))},
		{"Long", long, digestOf(long)},
		{"InvalidUTF8", "\xff\xfe", digestOf("\xff\xfe")},
		{"TruncatedRune", "caf\xc3", digestOf("caf\xc3")},
		{"NUL", "a\x00b", digestOf("a\x00b")},
		{"Newline", "a\nb", digestOf("a\nb")},
		{"Tab", "a\tb", digestOf("a\tb")},
		{"DEL", "a\x7fb", digestOf("a\x7fb")},
		{"C1Control", "a\u0085b", digestOf("a\u0085b")},
		{"DigestPrefix", "idem:sha256:abc", digestOf("idem:sha256:abc")},
		{"ADigestForm", digestOf(long), digestOf(digestOf(long))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := idem.StoredScope(tt.scope)
			if got != tt.want {
				t.Errorf("StoredScope(%q) = %q, want %q", tt.scope, got, tt.want)
			}
			if len(got) > 255 || !utf8.ValidString(got) || strings.IndexFunc(got, unicode.IsControl) >= 0 {
				t.Errorf("StoredScope(%q) = %q: not storable", tt.scope, got)
			}
		})
	}
	// A client that picks, as its own scope, the stored form of another's
	// must not address the other's records.
	if idem.StoredScope(digestOf(long)) == idem.StoredScope(long) {
		t.Error("a scope equal to another's digest form shares its stored form")
	}
}

// checkingStore is a store that fails a test when it is handed a value
// that some store could not keep: what PostgreSQL refuses (invalid UTF-8,
// NUL, an index entry too large) is refused here for every store.
type checkingStore struct {
	*memstore.Store
	t      *testing.T
	mu     sync.Mutex
	scopes []string
}

func (s *checkingStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	s.checkText("scope", p.Scope, 255)
	s.mu.Lock()
	s.scopes = append(s.scopes, p.Scope)
	s.mu.Unlock()
	rec, tx, err := s.Store.Begin(ctx, p)
	if tx != nil {
		tx = &checkingTx{Tx: tx, s: s}
	}
	return rec, tx, err
}

type checkingTx struct {
	idem.Tx
	s *checkingStore
}

func (c *checkingTx) Commit(ctx context.Context, p *idem.CommitParams) error {
	r := p.Record
	c.s.checkText("record scope", r.Scope, 255)
	c.s.checkText("fingerprint", r.Fingerprint, math.MaxInt)
	if r.Result.Status < math.MinInt32 || r.Result.Status > math.MaxInt32 {
		c.s.t.Errorf("store got status %d", r.Result.Status)
	}
	for name, values := range r.Result.Header {
		c.s.checkText("header name", name, math.MaxInt)
		for _, v := range values {
			if !utf8.ValidString(v) {
				v = strings.ToValidUTF8(v, "\uFFFD") // JSON-encoding stores do this; it never fails
			}
			if strings.ContainsAny(v, "\x00") {
				c.s.t.Errorf("store got header value %q with a NUL", v)
			}
		}
	}
	return c.Tx.Commit(ctx, p)
}

func (s *checkingStore) checkText(what, v string, maxLen int) {
	if len(v) > maxLen || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		s.t.Errorf("store got %s %q (%d bytes): not storable", what, v, len(v))
	}
}

// Scopes no store could keep (a 3000-byte token, invalid UTF-8) run once
// and replay, like any other; the store only ever sees their stored form.
func TestGuardStoresAnyScope(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789abcdef", 188)[:3000]
	for name, scope := range map[string]string{
		"Long":           long,
		"InvalidUTF8":    "Bearer \xff\xfe",
		"NUL":            "tenant\x00a",
		"DigestOfLong":   digestOf(long), // a client naming itself after Long's stored form
		"DigestPrefix":   "idem:sha256:",
		"PlainPrincipal": "user:42",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := &checkingStore{Store: memstore.New(), t: t}
			g := setup(t, s)
			runs := 0
			work := func(ctx context.Context) (idem.Result, error) {
				runs++
				tx, _ := memstore.TxFrom(ctx)
				tx.Set("effect", scope)
				return idem.Result{Status: 201, Body: []byte("done")}, nil
			}
			req := idem.Request{Scope: scope, Key: "k", Fingerprint: "fp"}
			for i := range 2 {
				res, replayed, err := g.Do(context.Background(), req, work)
				if err != nil || res.Status != 201 || replayed != (i == 1) {
					t.Fatalf("call %d: status %d, replayed %v, err %v; want 201, replayed %v", i+1, res.Status, replayed, err, i == 1)
				}
			}
			if runs != 1 {
				t.Errorf("the work ran %d times, want 1", runs)
			}
			rec, err := s.Lookup(context.Background(), &idem.LookupParams{Scope: idem.StoredScope(scope), Key: "k"})
			if err != nil {
				t.Fatalf("Lookup(StoredScope(scope)): %v", err)
			}
			if rec.Scope != idem.StoredScope(scope) {
				t.Errorf("record scope %q, want %q", rec.Scope, idem.StoredScope(scope))
			}
		})
	}
}

// Two scopes never share a record, however their stored forms are made.
func TestGuardStoredScopesStayApart(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3000)
	s := memstore.New()
	g := setup(t, s)
	scopes := []string{long, long + "y", digestOf(long), "\xff", "\xfe", "idem:sha256:", ""}
	for _, scope := range scopes {
		res, replayed, err := g.Do(context.Background(), idem.Request{Scope: scope, Key: "k", Fingerprint: "fp"},
			func(ctx context.Context) (idem.Result, error) {
				return idem.Result{Status: 201, Body: []byte(scope)}, nil
			})
		if err != nil || replayed || string(res.Body) != scope {
			t.Errorf("scope %.20q: replayed %v, body %.20q, err %v; want its own execution", scope, replayed, res.Body, err)
		}
	}
}

func TestGuardStoresAnyFingerprint(t *testing.T) {
	t.Parallel()
	s := &checkingStore{Store: memstore.New(), t: t}
	g := setup(t, s)
	ok := func(ctx context.Context) (idem.Result, error) { return idem.Result{Status: 201}, nil }
	for _, fp := range []string{"raw\xff\xfe", "with\x00nul", strings.Repeat("f", 5000)} {
		key := "k" + hex.EncodeToString([]byte(fp[:4]))
		for i := range 2 {
			_, replayed, err := g.Do(context.Background(), idem.Request{Key: key, Fingerprint: fp}, ok)
			if err != nil || replayed != (i == 1) {
				t.Fatalf("fingerprint %.10q, call %d: replayed %v, err %v", fp, i+1, replayed, err)
			}
		}
		_, _, err := g.Do(context.Background(), idem.Request{Key: key, Fingerprint: fp + "x"}, ok)
		if !errors.Is(err, idem.ErrMismatch) {
			t.Errorf("fingerprint %.10q then another: err %v, want ErrMismatch", fp, err)
		}
	}
}

func TestGuardRecordsStorableHeaders(t *testing.T) {
	t.Parallel()
	s := &checkingStore{Store: memstore.New(), t: t}
	g := setup(t, s)
	header := map[string][]string{
		"Content-Type": {"application/json"},
		"X-Nul":        {"a\x00b", "ok"},
		"X-Split":      {"a\r\nb"},
		"X-Bad\x00":    {"dropped"},
		"X-Bad\xff":    {"dropped"},
		"X-Obs-Text":   {"caf\xe9"}, // not UTF-8: stores keep text, so it is recorded as they would keep it
	}
	work := func(ctx context.Context) (idem.Result, error) {
		return idem.Result{Status: 200, Header: header, Body: []byte("b")}, nil
	}
	want := map[string][]string{
		"Content-Type": {"application/json"},
		"X-Nul":        {"a b", "ok"},
		"X-Split":      {"a  b"},
		"X-Obs-Text":   {"caf\uFFFD"},
	}
	first, _, err := g.Do(context.Background(), idem.Request{Key: "k"}, work)
	if err != nil {
		t.Fatal(err)
	}
	replay, replayed, err := g.Do(context.Background(), idem.Request{Key: "k"}, work)
	if err != nil || !replayed {
		t.Fatalf("replay: replayed %v, err %v", replayed, err)
	}
	for name, got := range map[string]map[string][]string{"first": first.Header, "replay": replay.Header} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s header = %q, want %q", name, got, want)
		}
	}
	if v := header["X-Nul"][0]; v != "a\x00b" {
		t.Errorf("the work's own header map was changed: %q", v)
	}
}

func TestGuardRefusesStatusBeyond32Bits(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g := setup(t, s)
	_, _, err := g.Do(context.Background(), idem.Request{Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := memstore.TxFrom(ctx)
		tx.Set("effect", "done")
		return idem.Result{Status: 1 << 40}, nil
	})
	if err == nil || errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("err = %v, want an error that is not ErrUnavailable", err)
	}
	if _, ok := s.Value("effect"); ok {
		t.Error("the work's effect was committed")
	}
}
