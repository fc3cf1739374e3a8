package idemclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemclient"
	"github.com/idemkit/idem/idemhttp"
)

func writeProblem(w http.ResponseWriter, status int, typ, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":%q,"title":%q,"status":%d,"detail":%q}`, typ, title, status, detail)
}

// TestDoNoRetryOnClientError checks rule C2: 400, 422 and the other 4xx
// that can never succeed unchanged are sent once, never retried, and
// surface as a final *ProblemError carrying the decoded problem details.
func TestDoNoRetryOnClientError(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 404, 405, 413, 422} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
				writeProblem(w, status, "https://example.test/p", "Nope", "the detail")
			}, nil)
			res, err := e.client.Do(context.Background(), e.intent(t, `{"amount":1}`))
			if res != nil {
				t.Fatalf("got response %+v, want nil", res)
			}
			var pe *idemclient.ProblemError
			if !errors.As(err, &pe) {
				t.Fatalf("got error %v, want a *ProblemError", err)
			}
			if !errors.Is(err, idemclient.ErrRejected) || !pe.Final {
				t.Errorf("got %v (Final %v), want a final answer matching ErrRejected", err, pe.Final)
			}
			if errors.Is(err, idemclient.ErrExhausted) || errors.Is(err, idemclient.ErrAccessDenied) {
				t.Errorf("got %v, want it not to match ErrExhausted", err)
			}
			want := idemhttp.Problem{Type: "https://example.test/p", Title: "Nope", Status: status, Detail: "the detail"}
			if got := pe.Problem; got != want {
				t.Errorf("problem: got %+v, want %+v", got, want)
			}
			if got, want := pe.Status, status; got != want {
				t.Errorf("status: got %d, want %d", got, want)
			}
			if got, want := len(e.server.Seen()), 1; got != want {
				t.Errorf("attempts: got %d, want %d", got, want)
			}
			if got := e.clock.Sleeps(); len(got) != 0 {
				t.Errorf("sleeps: got %v, want none", got)
			}
			if !strings.Contains(err.Error(), "the detail") {
				t.Errorf("error text: got %q, want it to carry the detail", err)
			}
		})
	}
}

// TestDoRetriesStatuses checks rule C2: 409, 429, 502, 503 and 504 are
// retried, with the same key and the same body on every attempt (rule C1).
func TestDoRetriesStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range idemclient.DefaultRetryStatuses() {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n <= 2 {
					w.WriteHeader(status)
					return
				}
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, `{"id":7}`)
			}, nil)
			in := e.intent(t, `{"amount":5}`)
			res, err := e.client.Do(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Status, http.StatusCreated; got != want {
				t.Errorf("status: got %d, want %d", got, want)
			}
			if got, want := string(res.Body), `{"id":7}`; got != want {
				t.Errorf("body: got %s, want %s", got, want)
			}
			if got, want := res.Attempts, 3; got != want {
				t.Errorf("attempts: got %d, want %d", got, want)
			}
			checkSameKeyAndBody(t, e.server.Seen(), in, 3)
			if got, want := len(e.clock.Sleeps()), 2; got != want {
				t.Errorf("sleeps: got %d, want %d", got, want)
			}
		})
	}
}

func checkSameKeyAndBody(t *testing.T, seen []seenRequest, in *idemclient.Intent, attempts int) {
	t.Helper()
	if got, want := len(seen), attempts; got != want {
		t.Fatalf("attempts at the server: got %d, want %d", got, want)
	}
	for i, s := range seen {
		key, err := idem.ParseKey(s.Key)
		if err != nil || key != in.Key || s.Keys != 1 {
			t.Errorf("attempt %d: got key %q (%d fields, %v), want %q once", i+1, s.Key, s.Keys, err, in.Key)
		}
		if got, want := s.Body, string(in.Body); got != want {
			t.Errorf("attempt %d: got body %q, want %q", i+1, got, want)
		}
	}
}

// TestDoRetryAfter checks rule C2: Retry-After is honoured in both its forms
// and capped by MaxDelay. The injected sleep records the delays.
func TestDoRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		retryAfter func(now time.Time) string
		want       time.Duration
	}{
		{"Seconds", 503, func(time.Time) string { return "3" }, 3 * time.Second},
		{"HTTPDate", 429, func(now time.Time) string { return now.Add(7 * time.Second).Format(http.TimeFormat) }, 7 * time.Second},
		{"InFlight", 409, func(time.Time) string { return "1" }, time.Second},
		{"CappedByMaxDelay", 503, func(time.Time) string { return "3600" }, 20 * time.Second},
		{"PastDate", 503, func(now time.Time) string { return now.Add(-time.Hour).Format(http.TimeFormat) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var e *testEnv
			e = setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
				statusThenCreated(tt.status, tt.retryAfter(e.clock.Now()))(n, w, r)
			}, func(c *idemclient.Config) {
				c.BaseDelay = time.Nanosecond // the jitter is negligible: the hint decides
				c.MaxDelay = 20 * time.Second
			})
			res, err := e.client.Do(context.Background(), e.intent(t, `{}`))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Attempts, 2; got != want {
				t.Errorf("attempts: got %d, want %d", got, want)
			}
			sleeps := e.clock.Sleeps()
			if len(sleeps) != 1 || sleeps[0] < tt.want || sleeps[0] > tt.want+time.Microsecond {
				t.Errorf("sleeps: got %v, want [%s]", sleeps, tt.want)
			}
		})
	}
}

// TestDoNetworkErrors checks rule C2: a dropped connection and a reset are
// retried with the same key.
func TestDoNetworkErrors(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			hijackClose(t, w, false)
		case 2:
			hijackClose(t, w, true)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}, nil)
	in := e.intent(t, `{"amount":9}`)
	res, err := e.client.Do(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Status, http.StatusCreated; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	// The transport may replay a request on a broken kept-alive connection
	// by itself (it does for requests with an Idempotency-Key); every
	// attempt it makes still carries the intent's key and body.
	seen := e.server.Seen()
	if len(seen) < 3 {
		t.Fatalf("attempts at the server: got %d, want at least 3", len(seen))
	}
	checkSameKeyAndBody(t, seen, in, len(seen))
}

// TestDoAttemptTimeout checks rule C2: an attempt over AttemptTimeout is
// abandoned and retried.
func TestDoAttemptTimeout(t *testing.T) {
	t.Parallel()
	abandoned := make(chan struct{})
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done() // never answer; the client gives up
			close(abandoned)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}, func(c *idemclient.Config) { c.AttemptTimeout = 250 * time.Millisecond })
	in := e.intent(t, `{}`)
	res, err := e.client.Do(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	<-abandoned
	// On a loaded machine a later attempt may time out too; each one is
	// retried with the same key and body.
	if res.Attempts < 2 {
		t.Errorf("attempts: got %d, want at least 2", res.Attempts)
	}
	checkSameKeyAndBody(t, e.server.Seen(), in, res.Attempts)
}

// TestDoExhaustedAttempts checks that a 5xx that persists ends with an
// *ExhaustedError after MaxAttempts, carrying the last response.
func TestDoExhaustedAttempts(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusServiceUnavailable, "about:blank", "Down", fmt.Sprint("attempt ", n))
	}, func(c *idemclient.Config) { c.MaxAttempts = 4 })
	_, err := e.client.Do(context.Background(), e.intent(t, `{}`))
	var ee *idemclient.ExhaustedError
	if !errors.As(err, &ee) || !errors.Is(err, idemclient.ErrExhausted) {
		t.Fatalf("got %v, want an *ExhaustedError", err)
	}
	if got, want := ee.Attempts, 4; got != want {
		t.Errorf("attempts: got %d, want %d", got, want)
	}
	var pe *idemclient.ProblemError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want it to wrap the last *ProblemError", err)
	}
	if got, want := pe.Problem.Detail, "attempt 4"; got != want {
		t.Errorf("last problem: got %q, want %q", got, want)
	}
	if errors.Is(err, idemclient.ErrRejected) {
		t.Errorf("got %v, want it not to match ErrRejected", err)
	}
	if got, want := len(e.server.Seen()), 4; got != want {
		t.Errorf("attempts at the server: got %d, want %d", got, want)
	}
	if got, want := len(e.clock.Sleeps()), 3; got != want {
		t.Errorf("sleeps: got %d, want %d", got, want)
	}
}

// TestDoExhaustedElapsed checks that MaxElapsed bounds the total time: no
// delay is slept past it.
func TestDoExhaustedElapsed(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
	}, func(c *idemclient.Config) {
		c.MaxElapsed = 5 * time.Second
		c.BaseDelay = time.Nanosecond
	})
	_, err := e.client.Do(context.Background(), e.intent(t, `{}`))
	var ee *idemclient.ExhaustedError
	if !errors.As(err, &ee) {
		t.Fatalf("got %v, want an *ExhaustedError", err)
	}
	// Attempts at 0 s, 2 s and 4 s; a third delay would end at 6 s.
	if got, want := ee.Attempts, 3; got != want {
		t.Errorf("attempts: got %d, want %d", got, want)
	}
	var total time.Duration
	for _, d := range e.clock.Sleeps() {
		total += d
	}
	if total >= 5*time.Second {
		t.Errorf("slept %s, want less than MaxElapsed", total)
	}
}

// TestDoContextCancelled checks that Do stops when ctx is done.
func TestDoContextCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		cancel()
		w.WriteHeader(http.StatusServiceUnavailable)
	}, nil)
	_, err := e.client.Do(ctx, e.intent(t, `{}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if got, want := len(e.server.Seen()), 1; got != want {
		t.Errorf("attempts: got %d, want %d", got, want)
	}
}

// TestDoReplayed checks that a replayed answer is reported as such.
func TestDoReplayed(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
	}, nil)
	res, err := e.client.Do(context.Background(), e.intent(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replayed {
		t.Error("got Replayed false, want true")
	}
}

// TestDoReplayedConflictIsFinal checks that a 409 the server replays is the
// handler's recorded answer (a business conflict), not "in flight": it is
// final and not retried.
func TestDoReplayedConflictIsFinal(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idempotent-Replayed", "true")
		writeProblem(w, http.StatusConflict, "about:blank", "Account closed", "")
	}, nil)
	_, err := e.client.Do(context.Background(), e.intent(t, `{}`))
	var pe *idemclient.ProblemError
	if !errors.As(err, &pe) || !pe.Replayed || !errors.Is(err, idemclient.ErrRejected) {
		t.Fatalf("got %v, want a replayed *ProblemError matching ErrRejected", err)
	}
	if got, want := len(e.server.Seen()), 1; got != want {
		t.Errorf("attempts: got %d, want %d", got, want)
	}
}

// TestDoServerErrorNotRetried checks that a 5xx outside RetryStatuses is
// returned at once and does not match ErrRejected (its outcome is unknown).
func TestDoServerErrorNotRetried(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}, nil)
	_, err := e.client.Do(context.Background(), e.intent(t, `{}`))
	var pe *idemclient.ProblemError
	if !errors.As(err, &pe) || pe.Status != 500 {
		t.Fatalf("got %v, want a *ProblemError with status 500", err)
	}
	if errors.Is(err, idemclient.ErrRejected) {
		t.Errorf("got %v, want it not to match ErrRejected", err)
	}
	if got, want := len(e.server.Seen()), 1; got != want {
		t.Errorf("attempts: got %d, want %d", got, want)
	}
}

// TestDoResponseTooLarge checks that MaxResponseBytes bounds what is read.
func TestDoResponseTooLarge(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 100))
	}, func(c *idemclient.Config) { c.MaxResponseBytes = 99 })
	if _, err := e.client.Do(context.Background(), e.intent(t, `{}`)); err == nil || !strings.Contains(err.Error(), "MaxResponseBytes") {
		t.Fatalf("got %v, want an error naming MaxResponseBytes", err)
	}
	if got, want := len(e.server.Seen()), 1; got != want {
		t.Errorf("attempts: got %d, want %d", got, want)
	}
}

// TestDoQuotedKey checks that a key that is not a bare token is sent as an
// sf-string and reaches the server unchanged.
func TestDoQuotedKey(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}, func(c *idemclient.Config) {
		c.NewKey = func() string { return `order"7,a;b\c` }
	})
	in := e.intent(t, `{}`)
	in.Header.Set("Idempotency-Key", "ignored")
	if _, err := e.client.Do(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	checkSameKeyAndBody(t, e.server.Seen(), in, 1)
}

// TestDoQuoteKey checks Config.QuoteKey: the sf-string form on the wire,
// the same key for the server.
func TestDoQuoteKey(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}, func(c *idemclient.Config) { c.QuoteKey = true })
	in := e.intent(t, `{}`)
	if _, err := e.client.Do(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	seen := e.server.Seen()
	if got, want := seen[0].Key, `"`+in.Key+`"`; got != want {
		t.Errorf("header: got %s, want %s", got, want)
	}
	checkSameKeyAndBody(t, seen, in, 1)
}

// TestDoHeaderName checks Config.Header: the key goes in the named header
// on every attempt, and not in the default one.
func TestDoHeaderName(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Request-Key")+"|"+r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}, func(c *idemclient.Config) { c.Header = "X-Request-Key" })
	in := e.intent(t, `{}`)
	if _, err := e.client.Do(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{in.Key + "|", in.Key + "|"}; !slices.Equal(got, want) {
		t.Errorf("X-Request-Key|Idempotency-Key per attempt: got %q, want %q", got, want)
	}
}

// TestDoIntentTooOld checks that an intent older than MaxIntentAge is not
// sent: the server may have forgotten its key.
func TestDoIntentTooOld(t *testing.T) {
	t.Parallel()
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}, nil)
	in := e.intent(t, `{}`)
	in.CreatedAt = e.clock.Now().Add(-idemclient.DefaultMaxIntentAge - time.Second)
	if _, err := e.client.Do(context.Background(), in); !errors.Is(err, idemclient.ErrIntentExpired) {
		t.Fatalf("got %v, want ErrIntentExpired", err)
	}
	if got := len(e.server.Seen()); got != 0 {
		t.Errorf("attempts: got %d, want 0", got)
	}
}

func TestNewConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   idemclient.Config
		field string
	}{
		{"MaxAttempts", idemclient.Config{MaxAttempts: -1}, "MaxAttempts"},
		{"MaxElapsed", idemclient.Config{MaxElapsed: -1}, "MaxElapsed"},
		{"AttemptTimeout", idemclient.Config{AttemptTimeout: -1}, "AttemptTimeout"},
		{"BaseDelay", idemclient.Config{BaseDelay: -1}, "BaseDelay"},
		{"MaxDelay", idemclient.Config{MaxDelay: -1}, "MaxDelay"},
		{"BaseOverMax", idemclient.Config{BaseDelay: 2 * time.Second, MaxDelay: time.Second}, "BaseDelay"},
		{"MaxResponseBytes", idemclient.Config{MaxResponseBytes: -1}, "MaxResponseBytes"},
		{"MaxIntentAge", idemclient.Config{MaxIntentAge: -1}, "MaxIntentAge"},
		{"Retry422", idemclient.Config{RetryStatuses: []int{503, 422}}, "RetryStatuses"},
		{"Retry400", idemclient.Config{RetryStatuses: []int{400}}, "RetryStatuses"},
		{"Retry200", idemclient.Config{RetryStatuses: []int{200}}, "RetryStatuses"},
		{"Header", idemclient.Config{Header: "Bad Header:"}, "Header"},
		{"Final500", idemclient.Config{FinalStatuses: []int{500}}, "FinalStatuses"},
		{"Final303", idemclient.Config{FinalStatuses: []int{303}}, "FinalStatuses"},
		{"FinalAlsoRetriedByDefault", idemclient.Config{FinalStatuses: []int{409}}, "FinalStatuses"},
		{"FinalAlsoRetried", idemclient.Config{RetryStatuses: []int{404}, FinalStatuses: []int{404}}, "FinalStatuses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := idemclient.New(&tt.cfg)
			if err == nil || !strings.Contains(err.Error(), "Config."+tt.field) {
				t.Fatalf("got %v, want an error naming Config.%s", err, tt.field)
			}
		})
	}
	if _, err := idemclient.New(nil); err != nil {
		t.Errorf("New(nil): got %v, want nil", err)
	}
	if _, err := idemclient.New(&idemclient.Config{RetryStatuses: []int{404, 503}}); err != nil {
		t.Errorf("a default final status listed as retried: got %v, want nil (it leaves the default FinalStatuses)", err)
	}
	if _, err := idemclient.New(&idemclient.Config{MaxDelay: 10 * time.Millisecond}); err != nil {
		t.Errorf("MaxDelay below the default base: got %v, want nil", err)
	}
}

func TestNewIntentValidation(t *testing.T) {
	t.Parallel()
	c, err := idemclient.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, method, url, want string }{
		{"EmptyMethod", "", "http://x/", "Intent.Method"},
		{"BadMethod", "PO ST", "http://x/", "Intent.Method"},
		{"RelativeURL", "POST", "/transfers", "Intent.URL"},
		{"OtherScheme", "POST", "ftp://x/", "Intent.URL"},
	}
	for _, tt := range tests {
		if _, err := c.NewIntent(tt.method, tt.url, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
	bad, err := idemclient.New(&idemclient.Config{NewKey: func() string { return "has space" }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.NewIntent("POST", "http://x/", nil); !errors.Is(err, idem.ErrInvalidKey) {
		t.Errorf("invalid generated key: got %v, want ErrInvalidKey", err)
	}
	in, err := c.NewIntent("POST", "http://x/", nil)
	if err != nil {
		t.Fatal(err)
	}
	in2, err := c.NewIntent("POST", "http://x/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.Key == in2.Key {
		t.Errorf("two intents got the same key %q, want distinct keys", in.Key)
	}
}
