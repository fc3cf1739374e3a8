package fakeprovider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
)

type result struct {
	status int
	id     string
	err    error
}

func charge(t *testing.T, c *http.Client, url, key, body string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/charges", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct{ ID string }
	_ = json.Unmarshal(b, &out)
	return result{status: resp.StatusCode, id: out.ID}
}

const body = `{"account":"alice","amount":100,"reference":"k1"}`

func setup(t *testing.T, cfg *fakeprovider.Config) (*fakeprovider.Provider, string, *http.Client) {
	t.Helper()
	p, url := fakeprovider.Start(t, cfg)
	return p, url, &http.Client{Timeout: 30 * time.Second}
}

func TestSameKeySameBodyReplaysOneCharge(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	first := charge(t, c, url, "k1", body)
	second := charge(t, c, url, "k1", body)
	if first.status != http.StatusCreated || second.status != http.StatusCreated {
		t.Fatalf("statuses %d, %d, want 201, 201", first.status, second.status)
	}
	if first.id == "" || first.id != second.id {
		t.Fatalf("charge ids %q, %q: want one charge replayed", first.id, second.id)
	}
	if got := p.Effects("k1"); got != 1 {
		t.Fatalf("effects for k1 = %d, want 1", got)
	}
	if got := p.Requests("k1"); got != 2 {
		t.Fatalf("requests for k1 = %d, want 2", got)
	}
}

func TestSameKeyOtherBodyRefused(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	charge(t, c, url, "k1", body)
	got := charge(t, c, url, "k1", `{"account":"alice","amount":200,"reference":"k1"}`)
	if got.status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", got.status)
	}
	if n := len(p.Charges()); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}

func TestMissingKeyRefused(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	if got := charge(t, c, url, "", body); got.status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", got.status)
	}
	if n := len(p.Charges()); n != 0 {
		t.Fatalf("%d charges, want 0", n)
	}
}

func TestDecline(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	got := charge(t, c, url, "k1", `{"account":"decline-bob","amount":100,"reference":"k1"}`)
	if got.status != http.StatusPaymentRequired {
		t.Fatalf("status %d, want 402", got.status)
	}
	if n := p.Effects("k1"); n != 0 {
		t.Fatalf("effects %d, want 0", n)
	}
}

func TestServerErrorAppliesNothing(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	p.Inject(fakeprovider.ServerError)
	if got := charge(t, c, url, "k1", body); got.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", got.status)
	}
	if n := p.Effects("k1"); n != 0 {
		t.Fatalf("effects after a 503: %d, want 0", n)
	}
	if got := charge(t, c, url, "k1", body); got.status != http.StatusCreated {
		t.Fatalf("retry status %d, want 201", got.status)
	}
	if n := p.Effects("k1"); n != 1 {
		t.Fatalf("effects after the retry: %d, want 1", n)
	}
}

func TestTimeoutAfterApply(t *testing.T) {
	t.Parallel()
	p, url, _ := setup(t, &fakeprovider.Config{Delay: 20 * time.Second})
	p.Inject(fakeprovider.TimeoutAfterApply)
	short := &http.Client{Timeout: 300 * time.Millisecond}
	got := charge(t, short, url, "k1", body)
	var ne interface{ Timeout() bool }
	if !errors.As(got.err, &ne) || !ne.Timeout() {
		t.Fatalf("got %+v, want a client timeout", got)
	}
	if n := p.Effects("k1"); n != 1 {
		t.Fatalf("effects after the timeout: %d, want 1 (applied before the delay)", n)
	}
	retry := charge(t, short, url, "k1", body)
	if retry.status != http.StatusCreated || retry.id != p.Charges()[0].ID {
		t.Fatalf("retry %+v, want 201 with the applied charge %q", retry, p.Charges()[0].ID)
	}
	if n := p.Effects("k1"); n != 1 {
		t.Fatalf("effects after the retry: %d, want 1", n)
	}
}

func TestResetAfterApply(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	p.Inject(fakeprovider.ResetAfterApply)
	got := charge(t, c, url, "k1", body)
	if got.err == nil {
		t.Fatalf("got %+v, want a connection error", got)
	}
	if n := p.Effects("k1"); n != 1 {
		t.Fatalf("effects after the reset: %d, want 1", n)
	}
	if retry := charge(t, c, url, "k1", body); retry.status != http.StatusCreated || p.Effects("k1") != 1 {
		t.Fatalf("retry %+v, effects %d: want the same charge, 1 effect", retry, p.Effects("k1"))
	}
}

func TestHold(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	p.Inject(fakeprovider.Hold)
	done := make(chan result, 1)
	go func() { done <- charge(t, c, url, "k1", body) }()
	select {
	case key := <-p.Held():
		if key != "k1" {
			t.Fatalf("held key %q, want k1", key)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request was not held within 30s")
	}
	if n := p.Effects("k1"); n != 0 {
		t.Fatalf("effects while held: %d, want 0", n)
	}
	p.Release()
	select {
	case got := <-done:
		if got.status != http.StatusCreated || p.Effects("k1") != 1 {
			t.Fatalf("after release: %+v, effects %d; want 201 and 1 effect", got, p.Effects("k1"))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30s of the release")
	}
}

func TestConcurrentSameKeyOneCharge(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Go(func() { ids[i] = charge(t, c, url, "k1", body).id })
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == "" {
			t.Fatalf("ids %v: want one charge for all", ids)
		}
	}
	if n := p.Effects("k1"); n != 1 {
		t.Fatalf("effects %d, want 1", n)
	}
}

func TestIgnoreKeysChargesTwice(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, &fakeprovider.Config{IgnoreKeys: true})
	charge(t, c, url, "k1", body)
	charge(t, c, url, "k1", body)
	if n := p.Effects("k1"); n != 2 {
		t.Fatalf("effects %d, want 2 (keys ignored)", n)
	}
}

func TestHoldThenDropAppliesNothing(t *testing.T) {
	t.Parallel()
	p, url, c := setup(t, nil)
	p.Inject(fakeprovider.HoldThenDrop)
	done := make(chan result, 1)
	go func() { done <- charge(t, c, url, "k1", body) }()
	select {
	case <-p.Held():
	case <-time.After(30 * time.Second):
		t.Fatal("the request was not held within 30s")
	}
	p.Release()
	select {
	case got := <-done:
		if got.err == nil || p.Effects("k1") != 0 {
			t.Fatalf("after release: %+v, effects %d; want a cut connection and no effect", got, p.Effects("k1"))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no end within 30s of the release")
	}
}

// The redirect faults apply the charge and answer a 3xx; followed, 303
// leads to a 404 and 302 to a 200 status page with an id of its own, and
// each GET is counted.
func TestRedirectAfterApply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fault            fakeprovider.Fault
		status, followed int
		location, id     string
	}{
		{fakeprovider.SeeOtherAfterApply, http.StatusSeeOther, http.StatusNotFound, fakeprovider.MovedPath, ""},
		{fakeprovider.FoundAfterApply, http.StatusFound, http.StatusOK, fakeprovider.StatusPath, "status-page"},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			t.Parallel()
			p, url, c := setup(t, nil)
			noFollow := &http.Client{Timeout: c.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			p.Inject(tc.fault)
			req, err := http.NewRequest(http.MethodPost, url+"/charges", bytes.NewBufferString(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Idempotency-Key", "k1")
			resp, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location || p.Effects("k1") != 1 || p.Gets() != 0 {
				t.Fatalf("got %d to %q, %d effects, %d GETs; want %d to %q, 1 effect, no GET",
					resp.StatusCode, resp.Header.Get("Location"), p.Effects("k1"), p.Gets(), tc.status, tc.location)
			}
			p.Inject(tc.fault)
			if got := charge(t, c, url, "k1", body); got.status != tc.followed || got.id != tc.id || p.Effects("k1") != 1 || p.Gets() != 1 {
				t.Fatalf("followed: %+v, %d effects, %d GETs; want %d with id %q, 1 effect, 1 GET", got, p.Effects("k1"), p.Gets(), tc.followed, tc.id)
			}
		})
	}
}
