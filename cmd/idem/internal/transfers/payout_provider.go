package transfers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// provider calls the payment provider's POST {url}/charges.
type provider struct {
	url      string
	client   *http.Client
	timeout  time.Duration // of each call
	attempts int           // calls per execution while the outcome is unknown
	backoff  time.Duration // before the second call; doubled after each
}

// newProvider returns the provider client of c. It never follows a
// redirect: a 3xx to POST /charges is the provider's answer, and an
// unknown outcome (see classify), never a GET of another URL whose status
// would be taken for the charge's.
func newProvider(c Config) *provider {
	return &provider{
		url: c.Provider,
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		timeout: c.ProviderTimeout, attempts: c.ProviderAttempts, backoff: 100 * time.Millisecond,
	}
}

// chargeOutcome is a definitive answer of the provider, the output of the
// payout's "charge" step.
type chargeOutcome struct {
	// ChargeID is the provider's charge id when it charged.
	ChargeID string `json:"charge_id,omitempty"`
	// Declined reports a 4xx: nothing was charged, and never will be
	// under this key.
	Declined bool `json:"declined,omitempty"`
	// Status is the provider's status code.
	Status int `json:"status"`
}

// errUnknownOutcome means the provider gave no definitive answer (a 5xx, a
// 3xx, a 202, a timeout, a lost connection, an unreadable success; see
// classify): the charge may or
// may not exist. It is retried with the same key and never compensated.
var errUnknownOutcome = errors.New("the provider's answer is unknown")

// chargeRequest is the body of POST {url}/charges.
type chargeRequest struct {
	Account   string `json:"account"`
	Amount    int64  `json:"amount"`
	Reference string `json:"reference"`
}

// charge asks the provider to charge amount to account under key (sent as
// Idempotency-Key and as the reference), calling again with the same key,
// up to p.attempts times, while the outcome is unknown. It returns the
// definitive answer, or an error matching errUnknownOutcome.
func (p *provider) charge(ctx context.Context, key, account string, amount int64) (chargeOutcome, error) {
	body, err := json.Marshal(chargeRequest{Account: account, Amount: amount, Reference: key})
	if err != nil {
		return chargeOutcome{}, err
	}
	var last error
	wait := p.backoff
	for i := range p.attempts {
		if i > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return chargeOutcome{}, fmt.Errorf("%w: %w (then: %w)", errUnknownOutcome, last, context.Cause(ctx))
			case <-t.C:
			}
			wait *= 2
		}
		out, err := p.call(ctx, key, body)
		if err == nil {
			return out, nil
		}
		last = err
	}
	return chargeOutcome{}, fmt.Errorf("%w after %d calls: %w", errUnknownOutcome, p.attempts, last)
}

// call makes one call: a definitive outcome, or the reason it is unknown.
func (p *provider) call(ctx context.Context, key string, body []byte) (chargeOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(p.url, "/")+"/charges", bytes.NewReader(body))
	if err != nil {
		return chargeOutcome{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := p.client.Do(req)
	if err != nil {
		return chargeOutcome{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return classify(resp.StatusCode, b, err)
}

// classify turns the provider's answer to POST /charges (its status, its
// body and the error of reading it) into a definitive outcome or the
// reason it is unknown. The definitive answers are (docs/PAYOUTS.md, "The
// provider's answers"):
//
//   - 200 or 201 with a charge id (see chargeID), read whole: charged;
//   - a 4xx but 408, 409, 425 and 429 (see notDefinitive): declined.
//
// Everything else is unknown, to be asked again with the same key and
// never compensated: a 1xx, every other 2xx (202 Accepted included), a
// 200 or 201 without an id or cut short, a 3xx (a redirect is never
// followed: the charge may exist whatever its target says), the 4xx of
// notDefinitive and every 5xx.
func classify(status int, body []byte, readErr error) (chargeOutcome, error) {
	switch {
	case status == http.StatusOK || status == http.StatusCreated:
		if readErr != nil {
			return chargeOutcome{}, fmt.Errorf("reading the provider's %d: %w", status, readErr)
		}
		id, ok := chargeID(body)
		if !ok {
			return chargeOutcome{}, fmt.Errorf("the provider answered %d without a charge id", status)
		}
		return chargeOutcome{ChargeID: id, Status: status}, nil
	case status >= 400 && status < 500 && !notDefinitive(status):
		return chargeOutcome{Declined: true, Status: status}, nil
	case status >= 300 && status < 400:
		return chargeOutcome{}, fmt.Errorf("the provider answered %d (a redirect, not followed: the charge may exist)", status)
	}
	return chargeOutcome{}, fmt.Errorf("the provider answered %d", status)
}

// notDefinitive reports the 4xx statuses that say nothing final about the
// charge: the request timed out at the provider (408), another request
// with the key is in progress there (409), it is too early (425), or it
// was rate-limited (429). They are retried as unknown outcomes, never
// taken for a decline, which would credit back a charge that may happen.
func notDefinitive(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return false
}

// chargeID reads the "id" of a provider's charge: a non-empty string, or a
// number, kept as its JSON text (a charge that exists must never be taken
// for an unknown outcome because of the type of its id).
func chargeID(body []byte) (string, bool) {
	var c struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &c); err != nil || len(c.ID) == 0 {
		return "", false
	}
	var s string
	if err := json.Unmarshal(c.ID, &s); err == nil {
		return s, s != ""
	}
	var n json.Number
	if err := json.Unmarshal(c.ID, &n); err == nil {
		return n.String(), true
	}
	return "", false
}
