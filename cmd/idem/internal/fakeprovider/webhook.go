package fakeprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idem/idemwebhook"
)

// Webhooks delivers events signed with Standard Webhooks to a receiver the
// way providers do: each until it is acknowledged, some several times,
// some at once, out of order, retried after a refusal that a provider
// retries (a 5xx, a 409, a lost connection).
type Webhooks struct {
	// URL is the receiver's.
	URL string
	// Secret signs the deliveries ("whsec_…"), unless a Delivery has its
	// own.
	Secret string
	// Client sends them. Defaults to a client with a 10-second timeout.
	Client *http.Client
	// Now is the sender's clock, stamped on each attempt. Defaults to
	// time.Now.
	Now func() time.Time
}

// Delivery is one event to deliver.
type Delivery struct {
	// ID is its webhook-id.
	ID string
	// Body is its payload.
	Body []byte
	// Secret, when set, signs it in place of Webhooks.Secret.
	Secret string
	// Skew shifts its timestamp from the sender's clock (negative: stale).
	Skew time.Duration
	// Forge sends it with a signature over another body, as an attacker
	// without the secret would.
	Forge bool
}

// DepositEvent is the payload of a deposit.created event.
func DepositEvent(depositID, account string, amount int64) []byte {
	b, _ := json.Marshal(map[string]any{"type": "deposit.created",
		"data": map[string]any{"deposit_id": depositID, "account": account, "amount": amount}})
	return b
}

// Answer is the receiver's answer to one attempt; Status is 0 when the
// connection failed.
type Answer struct {
	Status   int
	Body     []byte
	Replayed bool
}

// Send makes one attempt at d, signed at the sender's time plus d.Skew.
func (w *Webhooks) Send(ctx context.Context, d Delivery) (Answer, error) {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	secret := w.Secret
	if d.Secret != "" {
		secret = d.Secret
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(d.Body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	signed := d.Body
	if d.Forge {
		signed = append(bytes.Clone(d.Body), ' ')
	}
	if err := idemwebhook.StandardHeaders(req.Header, secret, d.ID, now().Add(d.Skew), signed); err != nil {
		return Answer{}, err
	}
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	res, err := client.Do(req)
	if err != nil {
		return Answer{}, nil // a lost connection: a provider retries
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return Answer{}, nil
	}
	return Answer{Status: res.StatusCode, Body: body, Replayed: res.Header.Get("Idempotent-Replayed") == "true"}, nil
}

// retried reports whether a provider retries an attempt answered so.
func retried(status int) bool {
	return status == 0 || status >= 500 || status == http.StatusConflict || status == http.StatusTooManyRequests
}

// Deliver sends d until an answer that a provider does not retry, at most
// attempts times, pausing backoff between attempts (doubling, up to a
// second). It returns every answer.
func (w *Webhooks) Deliver(ctx context.Context, d Delivery, attempts int, backoff time.Duration) ([]Answer, error) {
	var out []Answer
	for range attempts {
		a, err := w.Send(ctx, d)
		if err != nil {
			return out, err
		}
		out = append(out, a)
		if !retried(a.Status) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
	return out, fmt.Errorf("fakeprovider: delivery %s still unacknowledged after %d attempts", d.ID, attempts)
}

// StormConfig shapes Storm.
type StormConfig struct {
	// Seed makes the storm's choices reproducible.
	Seed uint64
	// MaxCopies is the most times an event is delivered (each copy until
	// acknowledged); each gets 1 to MaxCopies. Defaults to 5.
	MaxCopies int
	// Concurrency is how many deliveries are in flight at once; copies of
	// one event may be among them together. Defaults to 8.
	Concurrency int
	// Attempts bounds each copy's attempts. Defaults to 200.
	Attempts int
	// Backoff is the first pause between attempts. Defaults to 20ms.
	Backoff time.Duration
}

// Storm delivers every event 1 to MaxCopies times, the copies shuffled
// together (so events arrive out of order, and copies of one event
// sometimes at once), each copy retried as a provider does. It returns the
// answers of every copy by delivery id, in no particular order, and the
// first error.
func (w *Webhooks) Storm(ctx context.Context, events []Delivery, cfg StormConfig) (map[string][][]Answer, error) {
	if cfg.MaxCopies <= 0 {
		cfg.MaxCopies = 5
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 200
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 20 * time.Millisecond
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	var copies []Delivery
	for _, e := range events {
		for range 1 + rng.IntN(cfg.MaxCopies) {
			copies = append(copies, e)
		}
	}
	rng.Shuffle(len(copies), func(i, j int) { copies[i], copies[j] = copies[j], copies[i] })
	var (
		mu       sync.Mutex
		answers  = make(map[string][][]Answer)
		firstErr error
		wg       sync.WaitGroup
		work     = make(chan Delivery)
	)
	for range cfg.Concurrency {
		wg.Go(func() {
			for d := range work {
				a, err := w.Deliver(ctx, d, cfg.Attempts, cfg.Backoff)
				mu.Lock()
				answers[d.ID] = append(answers[d.ID], a)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for _, d := range copies {
		work <- d
	}
	close(work)
	wg.Wait()
	return answers, firstErr
}
