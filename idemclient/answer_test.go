package idemclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem/idemclient"
)

// TestDoRetriesRequestTimeoutAndTooEarly checks that 408 and 425, which a
// server sends when it ran nothing, are retried by default: a server that
// answers 408 (or 425) then 201 gets two attempts with one key, and the
// intent is resolved by the 201, not by the 408.
func TestDoRetriesRequestTimeoutAndTooEarly(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusRequestTimeout, http.StatusTooEarly} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			j := openJournal(t)
			e := setup(t, statusThenCreated(status, ""), func(c *idemclient.Config) { c.Journal = j })
			in := e.intent(t, `{"amount":8}`)
			res, err := e.client.Do(context.Background(), in)
			if err != nil {
				t.Fatalf("got %v, want the 201 of the second attempt", err)
			}
			if res.Status != http.StatusCreated || res.Attempts != 2 {
				t.Errorf("got status %d after %d attempts, want 201 after 2", res.Status, res.Attempts)
			}
			checkSameKeyAndBody(t, e.server.Seen(), in, 2)
			if got := pendingKeys(t, j); len(got) != 0 {
				t.Errorf("pending: got %q, want none", got)
			}
		})
	}
}

// TestDoAccessDeniedStaysPending checks that 401, 403 and 407 are returned as
// errors matching ErrAccessDenied, not ErrRejected, and leave the intent
// pending: once the credentials are fixed, Resume sends the same key and
// the intent runs.
func TestDoAccessDeniedStaysPending(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			j := openJournal(t)
			var authorized atomic.Bool
			e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if !authorized.Load() {
					writeProblem(w, status, "about:blank", http.StatusText(status), "token expired")
					return
				}
				w.WriteHeader(http.StatusCreated)
			}, func(c *idemclient.Config) { c.Journal = j })
			in := e.intent(t, `{"amount":2}`)
			_, err := e.client.Do(context.Background(), in)
			if !errors.Is(err, idemclient.ErrAccessDenied) || errors.Is(err, idemclient.ErrRejected) {
				t.Fatalf("got %v, want an error matching ErrAccessDenied and not ErrRejected", err)
			}
			var pe *idemclient.ProblemError
			if !errors.As(err, &pe) || pe.Status != status || pe.Final || pe.Problem.Detail != "token expired" {
				t.Errorf("got %#v, want a non-final *ProblemError with status %d and the problem details", pe, status)
			}
			if got := len(e.server.Seen()); got != 1 {
				t.Errorf("attempts: got %d, want 1", got)
			}
			if got := pendingKeys(t, j); !slices.Equal(got, []string{in.Key}) {
				t.Fatalf("pending: got %q, want the intent", got)
			}

			authorized.Store(true)
			results, err := e.client.Resume(context.Background())
			if err != nil || len(results) != 1 || results[0].Err != nil || results[0].Response.Status != http.StatusCreated {
				t.Fatalf("Resume: got %+v, %v; want one 201", results, err)
			}
			checkSameKeyAndBody(t, e.server.Seen(), in, 2)
			if got := pendingKeys(t, j); len(got) != 0 {
				t.Errorf("pending after Resume: got %q, want none", got)
			}
		})
	}
}

// TestDoClientErrorTable checks which 4xx settle an intent: a replayed one
// (the server recorded it), one in FinalStatuses; and which leave it
// pending: any other 4xx, which may come from a layer that ran nothing.
func TestDoClientErrorTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		replayed bool
		final    []int // Config.FinalStatuses; nil for the default
		resolved bool
	}{
		{"PaymentRequired", http.StatusPaymentRequired, false, nil, false},
		{"Gone", http.StatusGone, false, nil, false},
		{"Teapot", http.StatusTeapot, false, nil, false},
		{"ReplayedPaymentRequired", http.StatusPaymentRequired, true, nil, true},
		{"ReplayedForbidden", http.StatusForbidden, true, nil, true},
		{"ReplayedRequestTimeout", http.StatusRequestTimeout, true, nil, true},
		{"PaymentRequiredListedFinal", http.StatusPaymentRequired, false, []int{402}, true},
		{"NotFoundNotListedFinal", http.StatusNotFound, false, []int{402}, false},
		{"NotFoundByDefault", http.StatusNotFound, false, nil, true},
		{"MethodNotAllowed", http.StatusMethodNotAllowed, false, nil, true},
		{"TooLarge", http.StatusRequestEntityTooLarge, false, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := openJournal(t)
			e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if tt.replayed {
					w.Header().Set("Idempotent-Replayed", "true")
				}
				writeProblem(w, tt.status, "https://bank.example/problems/x", "No", "")
			}, func(c *idemclient.Config) {
				c.Journal = j
				c.FinalStatuses = tt.final
			})
			in := e.intent(t, `{}`)
			_, err := e.client.Do(context.Background(), in)
			var pe *idemclient.ProblemError
			if !errors.As(err, &pe) || pe.Status != tt.status {
				t.Fatalf("got %v, want a *ProblemError with status %d", err, tt.status)
			}
			if got := errors.Is(err, idemclient.ErrRejected); got != tt.resolved || pe.Final != tt.resolved {
				t.Errorf("ErrRejected: got %v (Final %v), want %v", got, pe.Final, tt.resolved)
			}
			if got, want := slices.Contains(pendingKeys(t, j), in.Key), !tt.resolved; got != want {
				t.Errorf("pending: got %v, want %v", got, want)
			}
			if got := len(e.server.Seen()); got != 1 {
				t.Errorf("attempts: got %d, want 1", got)
			}
		})
	}
}

// TestDoExhaustedIsNotRejected checks that an intent whose retries ran out
// on a retried 4xx (409 in flight, 429) is not reported as rejected: the
// error matches ErrExhausted only, and the intent stays pending.
func TestDoExhaustedIsNotRejected(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusConflict, http.StatusTooManyRequests} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			j := openJournal(t)
			e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
			}, func(c *idemclient.Config) {
				c.Journal = j
				c.MaxAttempts = 2
			})
			in := e.intent(t, `{}`)
			_, err := e.client.Do(context.Background(), in)
			if !errors.Is(err, idemclient.ErrExhausted) || errors.Is(err, idemclient.ErrRejected) {
				t.Fatalf("got %v, want ErrExhausted and not ErrRejected", err)
			}
			if got := pendingKeys(t, j); !slices.Equal(got, []string{in.Key}) {
				t.Errorf("pending: got %q, want the intent", got)
			}
		})
	}
}

// TestDoOtherRedirectionStatuses checks that a 3xx that is not a redirect
// Do follows or a 303 (here 300 and 304) does not settle a write.
func TestDoOtherRedirectionStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusMultipleChoices, http.StatusNotModified} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			j := openJournal(t)
			e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
			}, func(c *idemclient.Config) { c.Journal = j })
			in := e.intent(t, `{}`)
			if _, err := e.client.Do(context.Background(), in); !errors.Is(err, idemclient.ErrRedirected) {
				t.Fatalf("got %v, want ErrRedirected", err)
			}
			if got := pendingKeys(t, j); !slices.Equal(got, []string{in.Key}) {
				t.Errorf("pending: got %q, want the intent", got)
			}
		})
	}
	// A 3xx the server marks as a replay is its recorded answer: the write ran.
	j := openJournal(t)
	e := setup(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Location", "/transfers/9")
		w.WriteHeader(http.StatusFound)
		io.WriteString(w, "see /transfers/9")
	}, func(c *idemclient.Config) { c.Journal = j })
	res, err := e.client.Do(context.Background(), e.intent(t, `{}`))
	if err != nil || res.Status != http.StatusFound || !res.Replayed {
		t.Fatalf("replayed 302: got %+v, %v; want it returned as a replayed response", res, err)
	}
	if got := pendingKeys(t, j); len(got) != 0 {
		t.Errorf("pending: got %q, want none", got)
	}
}
