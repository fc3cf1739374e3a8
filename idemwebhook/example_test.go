package idemwebhook_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemwebhook"
	"github.com/idemkit/idem/memstore"
)

// A receiver of Standard Webhooks: the first delivery runs the handler in
// the store's transaction; its redelivery is answered from the record; a
// forged one is refused before anything runs.
func Example() {
	guard, _ := idem.New(memstore.New(), nil)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	v, _ := idemwebhook.NewStandard(secret)
	receive := idemwebhook.New(guard, v, &idemwebhook.Config{Endpoint: "orders", Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(receive(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := memstore.TxFrom(r.Context())
		tx.Set("order:"+idemwebhook.DeliveryID(r), "paid") // the effect, in the record's transaction
		fmt.Fprintln(w, "applied")
	})))
	defer srv.Close()

	deliver := func(secret string) {
		body := []byte(`{"type":"order.paid"}`)
		req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
		_ = idemwebhook.StandardHeaders(req.Header, secret, "msg_1", time.Now(), body)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		fmt.Printf("%d replayed=%q %s\n", res.StatusCode, res.Header.Get("Idempotent-Replayed"), bytes.TrimSpace(b[:min(len(b), 8)]))
	}
	deliver(secret)
	deliver(secret)
	deliver("whsec_c29tZWJvZHktZWxzZXM=")
	// Output:
	// 200 replayed="" applied
	// 200 replayed="true" applied
	// 401 replayed="" {"type":
}
