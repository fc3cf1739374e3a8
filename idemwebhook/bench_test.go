package idemwebhook_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemwebhook"
	"github.com/idemkit/idem/memstore"
)

var benchBody = bytes.Repeat([]byte(`{"type":"deposit.created","data":{"amount":1}}`), 20) // about 1 KiB

// BenchmarkVerify measures a Standard Webhooks verification of a 1 KiB
// body, with one secret and with two (rotation checks both).
func BenchmarkVerify(b *testing.B) {
	for _, secrets := range [][]string{{oldSecret}, {newSecret, oldSecret}} {
		b.Run(strconv.Itoa(len(secrets))+"secrets", func(b *testing.B) {
			v, _ := idemwebhook.NewStandard(secrets...)
			h := http.Header{}
			_ = idemwebhook.StandardHeaders(h, oldSecret, "msg_bench", time.Now(), benchBody)
			b.SetBytes(int64(len(benchBody)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(h, benchBody); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDelivery measures a whole delivery through the middleware (in
// process, memstore): a replay of one already processed, and a forged one
// refused at the signature.
func BenchmarkDelivery(b *testing.B) {
	g, _ := idem.New(memstore.New(), nil)
	v, _ := idemwebhook.NewStandard(oldSecret)
	h := idemwebhook.New(g, v, &idemwebhook.Config{Logger: slog.New(slog.DiscardHandler)})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	req := func(secret string) *http.Request {
		r := httptest.NewRequest("POST", "/", bytes.NewReader(benchBody))
		_ = idemwebhook.StandardHeaders(r.Header, secret, "msg_bench", time.Now(), benchBody)
		return r
	}
	h.ServeHTTP(httptest.NewRecorder(), req(oldSecret))
	for _, c := range []struct {
		name, secret string
		want         int
	}{{"replayed", oldSecret, 200}, {"forged", badSecret, 401}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req(c.secret))
				if w.Code != c.want {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
