package idemclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// errTooLarge fails a call whose response body is over
// Config.MaxResponseBytes. It is not retried: the answer would be as large.
var errTooLarge = errors.New("idemclient: response body exceeds Config.MaxResponseBytes")

// Client carries out intents: it sends an intent's request until it has a
// final answer, reusing the intent's key and body on every attempt. It sits
// above an *http.Client, whose RoundTripper sees single attempts. A Client
// is safe for concurrent use.
type Client struct {
	cfg    Config
	http   *http.Client // a copy of cfg.HTTPClient with the redirect policy
	policy Policy
	retry  map[int]bool
	final  map[int]bool
	randMu sync.Mutex
}

// New returns a Client. A nil cfg means defaults; an invalid field is an
// error that names it.
func New(cfg *Config) (*Client, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hc := *c.HTTPClient
	hc.CheckRedirect = redirectPolicy(c.Header, c.HTTPClient.CheckRedirect)
	return &Client{
		cfg:    c,
		http:   &hc,
		policy: Policy{BaseDelay: c.BaseDelay, MaxDelay: c.MaxDelay},
		retry:  statusSet(c.RetryStatuses),
		final:  statusSet(c.FinalStatuses),
	}, nil
}

func statusSet(statuses []int) map[int]bool {
	m := make(map[int]bool, len(statuses))
	for _, s := range statuses {
		m[s] = true
	}
	return m
}

// NewIntent makes a new intent with a fresh key from Config.NewKey. Call it
// once per decision (when the user confirms), not per attempt. The header
// and body may be set on the returned intent before its first Do; body is
// used as is, not copied.
func (c *Client) NewIntent(method, url string, body []byte) (*Intent, error) {
	in := &Intent{
		Key:       c.cfg.NewKey(),
		Method:    method,
		URL:       url,
		Header:    make(http.Header),
		Body:      body,
		CreatedAt: c.cfg.Now(),
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	return in, nil
}

// Response is a final answer that settled an intent: a 2xx, a 303 to a
// write (the server processed it and points at the result in Location; Do
// does not fetch it), or any 3xx the server marks Idempotent-Replayed.
type Response struct {
	// Status is the HTTP status code.
	Status int

	// Header and Body are the response's header and complete body.
	Header http.Header
	Body   []byte

	// Replayed reports whether the server replayed the answer it recorded
	// for an earlier attempt (Idempotent-Replayed: true) instead of
	// running the request now. Either way the effect happened once.
	Replayed bool

	// Attempts is the number of attempts made by this Do.
	Attempts int
}

// Do carries out in until it has a final answer and returns it. Every
// attempt sends in's method, URL, headers and body with in.Key as the
// Idempotency-Key header (see idem.FormatKey).
//
// When Config.Journal is set, in is saved to it before the first attempt
// (nothing is sent if that fails) and marked resolved once it has a final
// answer. Do resolves the intent exactly when it returns a nil error or an
// error matching ErrRejected; after any other error the intent stays
// pending, and sending the same intent again (or Resume) is the safe way
// on.
//
// Network errors, attempts over Config.AttemptTimeout and the statuses in
// Config.RetryStatuses are retried after Policy.Delay (honouring
// Retry-After), within Config.MaxAttempts and Config.MaxElapsed. What each
// answer means (docs/CLIENT.md has the full table):
//
//   - 2xx, or 303 (a write the server processed): a *Response; resolved.
//   - 307, 308: followed by the attempt with the same method, body and key,
//     at most MaxRedirects times, never from https to http. Do never lets
//     a redirect resend an intent with another method or without its body.
//   - any other 3xx (301 and 302 to a write, say): a *ProblemError matching
//     ErrRedirected; pending.
//   - a 4xx marked Idempotent-Replayed (an answer the server recorded), or
//     one in Config.FinalStatuses (400, 404, 405, 413, 422): a
//     *ProblemError matching ErrRejected; resolved.
//   - 401, 403, 407: a *ProblemError matching ErrAccessDenied; pending, so
//     that the same key can be sent again once the credentials are fixed.
//   - any other 4xx or 5xx not retried: a *ProblemError; pending.
//   - budget exhausted: an *ExhaustedError matching ErrExhausted, wrapping
//     the last attempt's error (a *ProblemError for a last 503, say);
//     pending.
//   - ctx done: its error; pending.
//   - in older than Config.MaxIntentAge: ErrIntentExpired, nothing sent.
func (c *Client) Do(ctx context.Context, in *Intent) (*Response, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = c.cfg.Now()
	}
	if age := c.cfg.Now().Sub(in.CreatedAt); age > c.cfg.MaxIntentAge {
		return nil, fmt.Errorf("%w: intent %s was created %s ago; Config.MaxIntentAge is %s", ErrIntentExpired, in.Key, age.Round(time.Second), c.cfg.MaxIntentAge)
	}
	if j := c.cfg.Journal; j != nil {
		if err := j.Save(ctx, in); err != nil {
			return nil, fmt.Errorf("idemclient: saving intent %s before its first attempt: %w", in.Key, err)
		}
	}
	start := c.cfg.Now()
	var last error
	for n := 1; ; n++ {
		timeout := min(c.cfg.AttemptTimeout, c.cfg.MaxElapsed-c.cfg.Now().Sub(start))
		if timeout <= 0 {
			return nil, exhausted(n-1, last)
		}
		res, err := c.attempt(ctx, in, timeout)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("idemclient: %s %s: intent %s left pending: %w", in.Method, in.URL, in.Key, ctx.Err())
		}
		hint := NoRetryAfter
		switch {
		case errors.Is(err, errTooLarge):
			return nil, err
		case err != nil:
			last = fmt.Errorf("idemclient: %s %s: attempt %d: %w", in.Method, in.URL, n, err)
		default:
			switch c.judge(res) {
			case settled:
				res.Attempts = n
				c.resolve(ctx, in, res.Status)
				return res, nil
			case rejected:
				c.resolve(ctx, in, res.Status)
				return nil, c.problem(in, res, n, true)
			case unsettled:
				return nil, c.problem(in, res, n, false)
			}
			last = c.problem(in, res, n, false)
			hint = parseRetryAfter(res.Header.Get("Retry-After"), c.cfg.Now())
		}
		if n >= c.cfg.MaxAttempts {
			return nil, exhausted(n, last)
		}
		d := c.delay(n, hint)
		if c.cfg.Now().Sub(start)+d >= c.cfg.MaxElapsed {
			return nil, exhausted(n, last)
		}
		if err := c.cfg.Sleep(ctx, d); err != nil {
			return nil, fmt.Errorf("idemclient: %s %s: intent %s left pending: %w", in.Method, in.URL, in.Key, err)
		}
	}
}

// verdict is what an answer means for its intent.
type verdict int

const (
	settled   verdict = iota // final, returned as a *Response; resolves the intent
	rejected                 // final, returned as a *ProblemError; resolves the intent
	retry                    // tried again with the same key
	unsettled                // returned as a *ProblemError; the intent stays pending
)

// judge applies the status table of Do to one answer. Only answers that
// settle the intent resolve it: a 2xx; a 303 (the server processed the
// write); an answer the server marks as a replay of what it recorded; and a
// 4xx in Config.FinalStatuses. Anything else may come from a layer that
// ran nothing (a proxy, an authentication check, a server about to time
// out), so the intent stays pending and only the same key can settle it.
func (c *Client) judge(res *Response) verdict {
	s := res.Status
	switch {
	case s >= 200 && s < 300, s == http.StatusSeeOther:
		return settled
	case s >= 300 && s < 400 && res.Replayed:
		return settled
	case s < 400:
		return unsettled
	case s < 500 && res.Replayed:
		return rejected
	case c.retry[s]:
		return retry
	case c.final[s]:
		return rejected
	default:
		return unsettled
	}
}

func exhausted(n int, last error) error {
	if last == nil {
		last = errors.New("no attempt fitted in Config.MaxElapsed")
	}
	return &ExhaustedError{Attempts: n, Last: last}
}

func (c *Client) delay(n int, hint time.Duration) time.Duration {
	if c.cfg.Rand == nil {
		return c.policy.Delay(n, nil, hint)
	}
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return c.policy.Delay(n, c.cfg.Rand, hint)
}

// attempt sends in once and reads the whole response within timeout.
func (c *Client) attempt(ctx context.Context, in *Intent, timeout time.Duration) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A fresh reader per attempt; NewRequest also sets GetBody from it, so
	// the transport can replay the same bytes if it retries internally.
	req, err := http.NewRequestWithContext(ctx, in.Method, in.URL, bytes.NewReader(in.Body))
	if err != nil {
		return nil, err
	}
	if len(in.Body) == 0 {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	}
	for k, vs := range in.Header {
		req.Header[k] = slices.Clone(vs)
	}
	req.Header.Set(c.cfg.Header, headerValue(in.Key, c.cfg.QuoteKey))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the response body: %w", err)
	}
	if int64(len(body)) > c.cfg.MaxResponseBytes {
		return nil, errTooLarge
	}
	return &Response{
		Status:   resp.StatusCode,
		Header:   resp.Header,
		Body:     body,
		Replayed: strings.EqualFold(strings.TrimSpace(resp.Header.Get(idemhttp.ReplayedHeader)), "true"),
	}, nil
}

func (c *Client) problem(in *Intent, res *Response, n int, final bool) *ProblemError {
	pe := &ProblemError{
		Method:   in.Method,
		URL:      in.URL,
		Status:   res.Status,
		Header:   res.Header,
		Body:     res.Body,
		Replayed: res.Replayed,
		Final:    final,
		Attempts: n,
	}
	if mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type")); err == nil && mt == idemhttp.ProblemContentType {
		_ = json.Unmarshal(res.Body, &pe.Problem) // a malformed body leaves Problem zero; Body keeps it
	}
	return pe
}

// resolve marks in resolved in the journal. A failure is logged, not
// returned: the intent stays pending, and resuming it later only fetches the
// recorded answer again.
func (c *Client) resolve(ctx context.Context, in *Intent, status int) {
	j := c.cfg.Journal
	if j == nil {
		return
	}
	err := j.MarkResolved(context.WithoutCancel(ctx), &MarkResolvedParams{Key: in.Key, Status: status, Now: c.cfg.Now()})
	if err != nil {
		// The key by its digest, as idemhttp's lines carry it, also inside
		// the journal's error.
		h := idem.KeyHash(in.Key)
		msg := err.Error()
		if in.Key != "" {
			msg = strings.ReplaceAll(msg, in.Key, "key_sha256:"+h)
		}
		c.cfg.Logger.WarnContext(ctx, "idemclient: could not mark intent resolved; it stays pending and a resume will fetch its recorded answer",
			"key_sha256", h, "status", status, "err", msg)
	}
}
