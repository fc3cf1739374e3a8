// Command client makes one transfer against the httpserver example with
// idemclient, the way an app should: the key is created once, when the
// user confirms, and every attempt reuses it.
//
// Its transport loses the first answer after the server has applied the
// transfer, as a dropped connection or a timeout would. The client cannot
// know whether the transfer ran, so it retries; the server recognises the
// key and replays its answer, and the money moves once.
//
//	go run ./examples/httpserver &
//	go run ./examples/client
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/idemkit/idem/idemclient"
)

func main() {
	url := flag.String("url", "http://localhost:8080", "the httpserver example's address")
	flag.Parse()
	if err := run(context.Background(), *url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run pays bob 100 cents from alice's account through the server at base.
func run(ctx context.Context, base string, out io.Writer) error {
	transport := &losesFirstAnswer{next: http.DefaultTransport}
	client, err := idemclient.New(&idemclient.Config{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		return err
	}
	before, err := balance(ctx, base)
	if err != nil {
		return err
	}

	// The user pressed Confirm: the one moment a key is made.
	in, err := client.NewIntent(http.MethodPost, base+"/transfers", []byte(`{"to":"bob","amount":100}`))
	if err != nil {
		return err
	}
	in.Header.Set("Authorization", "Bearer alice")
	in.Header.Set("Content-Type", "application/json")
	res, err := client.Do(ctx, in) // retries until it has an answer
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "key %s: %d after %d attempts (replayed: %v)\n", in.Key, res.Status, res.Attempts, res.Replayed)

	after, err := balance(ctx, base)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "alice paid %d cents\n", before-after)
	return nil
}

// balance returns alice's balance.
func balance(ctx context.Context, base string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/balance", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var b int64
	_, err = fmt.Fscanf(res.Body, `{"balance":%d}`, &b)
	return b, err
}

// losesFirstAnswer delivers the first request and drops its answer.
type losesFirstAnswer struct {
	next http.RoundTripper
	lost atomic.Bool
}

func (t *losesFirstAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(r)
	if err == nil && t.lost.CompareAndSwap(false, true) {
		res.Body.Close()
		return nil, errors.New("connection reset (the answer was lost on the way back)")
	}
	return res, err
}
