// Package keyperattempt is idemvet's corpus for the keyperattempt
// analyzer: one finding or near miss per function, marked by a
// comment "want" or "nearmiss".
package keyperattempt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemclient"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

var _ = mrand.N[int]

func uuidPerAttempt(req *http.Request) (*http.Response, error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		key := uuid.NewString() // want `idempotency key made per attempt, in a retry loop`
		req.Header.Set("Idempotency-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			return res, nil
		}
		last = err
	}
	return nil, last
}

func randomKeyInline(c *http.Client, req *http.Request) {
	for range 3 {
		req.Header.Set("Idempotency-Key", idem.RandomKey()) // want `in a retry loop`
		if _, err := c.Do(req); err == nil {
			return
		}
	}
}

func clockKey(c *http.Client, req *http.Request) {
	for {
		k := fmt.Sprintf("%d", time.Now().UnixNano()) // want `in a retry loop`
		req.Header["Idempotency-Key"] = []string{k}
		if _, err := c.Do(req); err == nil {
			break
		}
	}
}

func cryptoRandKey(c *http.Client, req *http.Request, n int) {
	for i := 0; i < n; i++ {
		b := make([]byte, 16)
		rand.Read(b) // want `in a retry loop`
		req.Header.Add("Idempotency-Key", hex.EncodeToString(b))
		if _, err := c.Do(req); err == nil {
			return
		}
	}
}

func newIntentPerAttempt(ctx context.Context, c *idemclient.Client, url string, body []byte) {
	for range 5 {
		in, _ := c.NewIntent("POST", url, body) // want `in a retry loop`
		if _, err := c.Do(ctx, in); err == nil {
			return
		}
	}
}

func intentLiteral(ctx context.Context, c *idemclient.Client) {
	for range 3 {
		in := &idemclient.Intent{Key: uuid.New().String(), Method: "POST"} // want `in a retry loop`
		if _, err := c.Do(ctx, in); err == nil {
			return
		}
	}
}

func natsMsgID(nc *nats.Conn, data []byte) {
	for try := 0; try < 3; try++ {
		m := nats.NewMsg("orders")
		m.Data = data
		m.Header.Set("Nats-Msg-Id", uuid.NewString()) // want `in a retry loop`
		if nc.PublishMsg(m) == nil {
			return
		}
	}
}

func grpcWithKey(ctx context.Context, cc *grpc.ClientConn) {
	for range 3 {
		kctx := idemgrpc.WithKey(ctx, idem.UUIDv7Key()) // want `in a retry loop`
		if cc.Invoke(kctx, "/orders.Orders/Create", nil, nil) == nil {
			return
		}
	}
}

func grpcMetadata(ctx context.Context, cc *grpc.ClientConn) {
	for range 3 {
		mctx := metadata.AppendToOutgoingContext(ctx, idemgrpc.MetadataKey, uuid.NewString()) // want `in a retry loop`
		if cc.Invoke(mctx, "/orders.Orders/Create", nil, nil) == nil {
			return
		}
	}
}

func reassignedInLoop(c *http.Client, req *http.Request) {
	key := ""
	for {
		key = idem.RandomKey() // want `in a retry loop`
		req.Header.Set("Idempotency-Key", key)
		if _, err := c.Do(req); err == nil {
			return
		}
	}
}

func reasonlessIgnore(c *http.Client, req *http.Request) {
	for range 3 {
		//idemvet:ignore
		req.Header.Set("Idempotency-Key", uuid.NewString()) // want `in a retry loop`
		if _, err := c.Do(req); err == nil {
			return
		}
	}
}

// Near misses.

func keyBeforeLoop(c *http.Client, req *http.Request) {
	key := uuid.NewString() // nearmiss: made once per intent
	for range 3 {
		req.Header.Set("Idempotency-Key", key)
		if _, err := c.Do(req); err == nil {
			return
		}
	}
}

func onePerOrder(c *http.Client, orders [][]byte) {
	for _, o := range orders {
		req, _ := http.NewRequest("POST", "https://api.example/orders", bytes.NewReader(o))
		req.Header.Set("Idempotency-Key", uuid.NewString()) // nearmiss: each order is its own intent
		c.Do(req)
	}
}

type order struct{ ID string }

func keyFromOrder(c *http.Client, req *http.Request, o order) {
	for range 3 {
		req.Header.Set("Idempotency-Key", o.ID) // nearmiss: the key comes from the order
		if _, err := c.Do(req); err == nil {
			return
		}
	}
}

func clockNotKey(c *http.Client, req *http.Request, key string) {
	for range 3 {
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("X-Request-Start", time.Now().String()) // nearmiss: not a key header
		if _, err := c.Do(req); err == nil {
			return
		}
	}
}

func jitter(c *http.Client, req *http.Request, key string) {
	req.Header.Set("Idempotency-Key", key)
	for range 3 {
		if _, err := c.Do(req); err == nil {
			return
		}
		time.Sleep(time.Duration(mrand.IntN(100)) * time.Millisecond) // nearmiss: backoff jitter
	}
}

func natsIDFromOrder(nc *nats.Conn, o order) {
	for range 3 {
		m := nats.NewMsg("orders")
		m.Header.Set("Nats-Msg-Id", o.ID) // nearmiss: the id is the order's
		if nc.PublishMsg(m) == nil {
			return
		}
	}
}

func batchOfIntents(n int) []*idemclient.Intent {
	var out []*idemclient.Intent
	for range n {
		out = append(out, &idemclient.Intent{Key: idem.RandomKey()}) // nearmiss: no attempt in this loop
	}
	return out
}

func intentBeforeLoop(ctx context.Context, c *idemclient.Client, url string) {
	in, _ := c.NewIntent("POST", url, nil) // nearmiss: one intent, many attempts
	for range 3 {
		if _, err := c.Do(ctx, in); err == nil {
			return
		}
	}
}

func reasonedIgnore(c *http.Client, req *http.Request) {
	for range 3 {
		//idemvet:ignore each round of this load test is a new intent on purpose
		req.Header.Set("Idempotency-Key", uuid.NewString()) // nearmiss: silenced with a reason
		if _, err := c.Do(req); err == nil {
			return
		}
	}
}

func workers(c *http.Client, n int, work chan *http.Request) {
	for range n {
		go func() {
			for req := range work {
				req.Header.Set("Idempotency-Key", uuid.NewString()) // nearmiss: one intent per item, in a worker
				if _, err := c.Do(req); err != nil {
					return
				}
			}
		}()
	}
}

func sameBodyManyIntents(c *http.Client, n int) {
	for range n {
		req, _ := http.NewRequest("POST", "https://api.example/pings", nil)
		req.Header.Set("Idempotency-Key", idem.RandomKey()) // nearmiss: n intents; no attempt is judged
		c.Do(req)
	}
}

func grpcKeyOnce(ctx context.Context, cc *grpc.ClientConn) error {
	ctx = idemgrpc.WithKey(ctx, uuid.NewString()) // nearmiss: one call, no loop
	return cc.Invoke(ctx, "/orders.Orders/Create", nil, nil)
}

func workerQueue(ctx context.Context, c *idemclient.Client, next func() (int, bool)) {
	for {
		i, ok := next()
		if !ok {
			return
		}
		in, err := c.NewIntent("POST", fmt.Sprint("https://api.example/transfers/", i), nil) // nearmiss: one intent per queued item
		if err != nil {
			continue
		}
		if _, err = c.Do(ctx, in); err != nil {
			fmt.Println(err)
		}
	}
}
