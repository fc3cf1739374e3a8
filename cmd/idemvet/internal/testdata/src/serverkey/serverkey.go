// Package serverkey is idemvet's corpus for the serverkey analyzer: one
// finding or near miss per function, marked by a comment "want" or
// "nearmiss".
package serverkey

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemclient"
	"github.com/nats-io/nats.go"
	"google.golang.org/grpc/metadata"
)

func uuidKey(r *http.Request) idem.Request {
	return idem.Request{Scope: "t", Key: uuid.NewString()} // want `the server makes up the client's idempotency key \(idem.Request.Key`
}

func leasedRandomKey(r *http.Request) idem.LeasedRequest {
	return idem.LeasedRequest{Key: idem.RandomKey()} // want `idem.LeasedRequest.Key`
}

func fallbackKey(r *http.Request) idem.Request {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		key = uuid.NewString() // want `makes up`
	}
	return idem.Request{Key: key}
}

func clockKey() idem.Request {
	return idem.Request{Key: strconv.FormatInt(time.Now().UnixNano(), 10)} // want `makes up`
}

func assignedKey(r *http.Request) idem.Request {
	var req idem.Request
	req.Scope = r.URL.Path
	req.Key = idem.UUIDv7Key() // want `makes up`
	return req
}

func beginParams() *idem.BeginParams {
	b := make([]byte, 16)
	rand.Read(b) // want `idem.BeginParams.Key`
	return &idem.BeginParams{Key: hex.EncodeToString(b)}
}

func claimParams() idem.ClaimParams {
	return idem.ClaimParams{Key: uuid.New().String()} // want `idem.ClaimParams.Key`
}

func mathRandKey() idem.Request {
	return idem.Request{Key: fmt.Sprint(mrand.Int64())} // want `makes up`
}

func pointerAssign() *idem.LeasedRequest {
	p := &idem.LeasedRequest{Scope: "s"}
	p.Key = uuid.NewString() // want `makes up`
	return p
}

func mustKey() idem.Request {
	return idem.Request{Key: uuid.Must(uuid.NewRandom()).String()} // want `makes up`
}

func reasonlessIgnore() idem.Request {
	//idemvet:ignore
	return idem.Request{Key: uuid.NewString()} // want `makes up`
}

// Near misses.

func headerKey(r *http.Request) idem.Request {
	return idem.Request{Key: r.Header.Get("Idempotency-Key")} // nearmiss: the client's key
}

func bodyKey(r *http.Request) (idem.Request, error) {
	var in struct{ Key string }
	err := json.NewDecoder(r.Body).Decode(&in)
	return idem.Request{Key: in.Key}, err // nearmiss: the key is in the body
}

func parsedKey(r *http.Request) (idem.Request, error) {
	key, err := idem.ParseKey(r.Header.Get("Idempotency-Key"))
	return idem.Request{Key: key}, err // nearmiss: parsed from the header
}

func requestIDAlongside(r *http.Request) idem.Request {
	reqID := uuid.NewString() // nearmiss: a request id for the logs, not the key
	r.Header.Set("X-Request-Id", reqID)
	return idem.Request{Key: r.Header.Get("Idempotency-Key")}
}

type job struct{ Key string }

func ownStruct() job {
	return job{Key: uuid.NewString()} // nearmiss: not an idem request
}

func clientIntent() *idemclient.Intent {
	return &idemclient.Intent{Key: idem.RandomKey()} // nearmiss: a client makes its own key
}

func grpcKey(ctx context.Context) idem.Request {
	md, _ := metadata.FromIncomingContext(ctx)
	return idem.Request{Key: md.Get("idempotency-key")[0]} // nearmiss: from the call's metadata
}

func natsKey(m *nats.Msg) idem.Request {
	return idem.Request{Key: m.Header.Get("Nats-Msg-Id")} // nearmiss: the message id
}

func reasonedIgnore() idem.Request {
	//idemvet:ignore the batch importer is the client here and names each row once
	return idem.Request{Key: uuid.NewString()} // nearmiss: silenced with a reason
}

func pathKey(r *http.Request) idem.Request {
	return idem.Request{Key: "order-" + r.PathValue("id")} // nearmiss: derived from the request
}

func stampedAt(r *http.Request) (idem.Request, time.Time) {
	at := time.Now() // nearmiss: a time, not the key
	return idem.Request{Key: r.Header.Get("Idempotency-Key")}, at
}
