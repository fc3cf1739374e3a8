package idemclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemclient"
)

// hit is what a redirect test server saw of one request.
type hit struct {
	Method, Path, Key, Body string
}

// hitServer records every request and answers it with respond.
type hitServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
}

func newHitServer(t *testing.T, tls bool, respond func(w http.ResponseWriter, r *http.Request)) *hitServer {
	t.Helper()
	s := &hitServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key, err := idem.ParseKey(r.Header.Get("Idempotency-Key"))
		if err != nil {
			key = "invalid:" + r.Header.Get("Idempotency-Key")
		}
		s.mu.Lock()
		s.hits = append(s.hits, hit{r.Method, r.URL.Path, key, string(body)})
		s.mu.Unlock()
		respond(w, r)
	})
	if tls {
		s.Server = httptest.NewTLSServer(h)
	} else {
		s.Server = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

func (s *hitServer) Hits() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hits)
}

// newRedirectClient returns a client over hc with a journal and an
// injected clock, and an intent to POST body to url.
func newRedirectClient(t *testing.T, hc *http.Client, edit func(*idemclient.Config)) (*idemclient.Client, *idemclient.DirJournal) {
	t.Helper()
	j := openJournal(t)
	clock := newFakeTime()
	cfg := &idemclient.Config{HTTPClient: hc, Journal: j, Now: clock.Now, Sleep: clock.Sleep, Logger: discardLogger}
	if edit != nil {
		edit(cfg)
	}
	c, err := idemclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, j
}

func postIntent(t *testing.T, c *idemclient.Client, url, body string) *idemclient.Intent {
	t.Helper()
	in, err := c.NewIntent(http.MethodPost, url, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	in.Header.Set("Content-Type", "application/json")
	return in
}

// TestDoRedirectNeverTurnsWriteIntoGet is the incident of a redirect that
// reported a transfer as done although it never ran: the server answers
// POST /transfers with a 301 or 302 and the redirected GET with 200.
// net/http would follow with a GET without the body; Do must not send it,
// must return an error matching ErrRedirected (not a success, not a final
// rejection) and must leave the intent pending. It must hold whatever
// CheckRedirect the configured http.Client has, even one that follows
// everything.
func TestDoRedirectNeverTurnsWriteIntoGet(t *testing.T) {
	t.Parallel()
	followAll := func(*http.Request, []*http.Request) error { return nil }
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound} {
		for _, userCheck := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/UserCheckRedirect=%v", status, userCheck), func(t *testing.T) {
				t.Parallel()
				srv := newHitServer(t, false, func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost {
						http.Redirect(w, r, "/transfers/list", status)
						return
					}
					io.WriteString(w, `{"transfers":[]}`)
				})
				hc := srv.Client()
				if userCheck {
					hc.CheckRedirect = followAll
				}
				c, j := newRedirectClient(t, hc, nil)
				in := postIntent(t, c, srv.URL+"/transfers", `{"amount":100}`)
				res, err := c.Do(context.Background(), in)
				if res != nil {
					t.Fatalf("got response %d %s, want none: the transfer never ran", res.Status, res.Body)
				}
				if !errors.Is(err, idemclient.ErrRedirected) || errors.Is(err, idemclient.ErrRejected) {
					t.Fatalf("got %v, want an error matching ErrRedirected and not ErrRejected", err)
				}
				var pe *idemclient.ProblemError
				if !errors.As(err, &pe) || pe.Status != status || pe.Final || !strings.HasSuffix(pe.Header.Get("Location"), "/transfers/list") {
					t.Errorf("got %#v, want a non-final *ProblemError with status %d and the Location", pe, status)
				}
				if !strings.Contains(err.Error(), "/transfers/list") || !strings.Contains(err.Error(), "pending") {
					t.Errorf("error text %q: want it to name the Location and say the intent stays pending", err)
				}
				want := []hit{{http.MethodPost, "/transfers", in.Key, `{"amount":100}`}}
				if got := srv.Hits(); !slices.Equal(got, want) {
					t.Errorf("requests: got %+v, want only %+v", got, want)
				}
				if got := pendingKeys(t, j); !slices.Equal(got, []string{in.Key}) {
					t.Errorf("pending: got %q, want the intent", got)
				}
			})
		}
	}
}

// TestDoSeeOtherIsFinal checks that a 303 to a write is the server's final
// answer (it processed the write and points at the result): Do returns it
// as a *Response without fetching the Location, and resolves the intent.
func TestDoSeeOtherIsFinal(t *testing.T) {
	t.Parallel()
	srv := newHitServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			http.Redirect(w, r, "/transfers/7", http.StatusSeeOther)
			return
		}
		io.WriteString(w, `{"id":7}`)
	})
	c, j := newRedirectClient(t, srv.Client(), nil)
	in := postIntent(t, c, srv.URL+"/transfers", `{"amount":7}`)
	res, err := c.Do(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Status, http.StatusSeeOther; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	if got := res.Header.Get("Location"); got != "/transfers/7" {
		t.Errorf("Location: got %q, want /transfers/7", got)
	}
	if got := srv.Hits(); len(got) != 1 || got[0].Method != http.MethodPost {
		t.Errorf("requests: got %+v, want the POST only", got)
	}
	if got := pendingKeys(t, j); len(got) != 0 {
		t.Errorf("pending: got %q, want none", got)
	}
}

// TestDoFollowsTemporaryRedirects checks that a 307 or 308 is followed with
// the same method, the same body (replayed) and the same key, and that the
// chain is bounded by MaxRedirects.
func TestDoFollowsTemporaryRedirects(t *testing.T) {
	t.Parallel()
	// /hop/n redirects to /hop/n-1; /hop/0 creates the transfer.
	newChain := func(t *testing.T, status int) *hitServer {
		return newHitServer(t, false, func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
			if n > 0 {
				http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), status)
				return
			}
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":1}`)
		})
	}
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			srv := newChain(t, status)
			c, j := newRedirectClient(t, srv.Client(), nil)
			in := postIntent(t, c, fmt.Sprintf("%s/hop/%d", srv.URL, idemclient.MaxRedirects), `{"amount":3}`)
			res, err := c.Do(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res.Status, http.StatusCreated; got != want {
				t.Errorf("status: got %d, want %d", got, want)
			}
			hits := srv.Hits()
			if got, want := len(hits), idemclient.MaxRedirects+1; got != want {
				t.Errorf("requests: got %d, want %d", got, want)
			}
			for i, h := range hits {
				if want := (hit{http.MethodPost, fmt.Sprintf("/hop/%d", idemclient.MaxRedirects-i), in.Key, `{"amount":3}`}); h != want {
					t.Errorf("request %d: got %+v, want %+v", i, h, want)
				}
			}
			if got := pendingKeys(t, j); len(got) != 0 {
				t.Errorf("pending: got %q, want none", got)
			}
		})
	}
	t.Run("TooMany", func(t *testing.T) {
		t.Parallel()
		srv := newChain(t, http.StatusTemporaryRedirect)
		c, j := newRedirectClient(t, srv.Client(), nil)
		in := postIntent(t, c, fmt.Sprintf("%s/hop/%d", srv.URL, idemclient.MaxRedirects+1), `{}`)
		_, err := c.Do(context.Background(), in)
		if !errors.Is(err, idemclient.ErrRedirected) {
			t.Fatalf("got %v, want ErrRedirected", err)
		}
		hits := srv.Hits()
		if got, want := len(hits), idemclient.MaxRedirects+1; got != want {
			t.Errorf("requests: got %d, want %d (the original and MaxRedirects hops, no retry)", got, want)
		}
		for _, h := range hits {
			if h.Path == "/hop/0" {
				t.Errorf("the redirect past MaxRedirects was followed")
			}
		}
		if got := pendingKeys(t, j); !slices.Equal(got, []string{in.Key}) {
			t.Errorf("pending: got %q, want the intent", got)
		}
	})
	t.Run("RefusedByUserCheckRedirect", func(t *testing.T) {
		t.Parallel()
		srv := newChain(t, http.StatusTemporaryRedirect)
		hc := srv.Client()
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return errors.New("no redirects here") }
		c, _ := newRedirectClient(t, hc, nil)
		_, err := c.Do(context.Background(), postIntent(t, c, srv.URL+"/hop/1", `{}`))
		if !errors.Is(err, idemclient.ErrRedirected) {
			t.Fatalf("got %v, want ErrRedirected", err)
		}
		if got := len(srv.Hits()); got != 1 {
			t.Errorf("requests: got %d, want 1 (a refused redirect is an answer, not a network error to retry)", got)
		}
	})
}

// TestDoRedirectHTTPSToHTTP checks that a 307 from https to http is not
// followed: the body and the key would travel in clear.
func TestDoRedirectHTTPSToHTTP(t *testing.T) {
	t.Parallel()
	plain := newHitServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	secure := newHitServer(t, true, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/transfers", http.StatusTemporaryRedirect)
	})
	c, j := newRedirectClient(t, secure.Client(), nil)
	in := postIntent(t, c, secure.URL+"/transfers", `{"secret":1}`)
	if _, err := c.Do(context.Background(), in); !errors.Is(err, idemclient.ErrRedirected) {
		t.Fatalf("got %v, want ErrRedirected", err)
	}
	if got := plain.Hits(); len(got) != 0 {
		t.Errorf("plain http server got %+v, want nothing", got)
	}
	if got := pendingKeys(t, j); !slices.Equal(got, []string{in.Key}) {
		t.Errorf("pending: got %q, want the intent", got)
	}
}

// TestDoGetFollowsRedirects checks that a GET intent follows a 302 as
// net/http does: it keeps its method, so nothing changes.
func TestDoGetFollowsRedirects(t *testing.T) {
	t.Parallel()
	srv := newHitServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	})
	c, _ := newRedirectClient(t, srv.Client(), nil)
	in, err := c.NewIntent(http.MethodGet, srv.URL+"/old", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(context.Background(), in)
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("got %+v, %v; want 200", res, err)
	}
	want := []hit{{http.MethodGet, "/old", in.Key, ""}, {http.MethodGet, "/new", in.Key, ""}}
	if got := srv.Hits(); !slices.Equal(got, want) {
		t.Errorf("requests: got %+v, want %+v", got, want)
	}
}
