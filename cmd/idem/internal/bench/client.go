package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/idemhttp"
)

// client sends the service's requests as one principal.
type client struct {
	hc    *http.Client
	token string
}

// answer is a response as the bench needs it.
type answer struct {
	status   int
	replayed bool
	body     []byte
}

// label names an answer in Variant.Statuses.
func (a answer) label() string {
	s := strconv.Itoa(a.status)
	if a.replayed {
		s += " replayed"
	}
	return s
}

func (c *client) do(ctx context.Context, method, url, key string, body []byte) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(idemhttp.DefaultHeader, key)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{
		status:   res.StatusCode,
		replayed: res.Header.Get(idemhttp.ReplayedHeader) == "true",
		body:     b,
	}, nil
}

func (c *client) putAccount(ctx context.Context, base, id string, balance int64) error {
	a, err := c.do(ctx, http.MethodPut, base+"/accounts/"+id, "", fmt.Appendf(nil, `{"balance":%d}`, balance))
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		return fmt.Errorf("PUT /accounts/%s: %d %s", id, a.status, a.body)
	}
	return nil
}

func (c *client) balance(ctx context.Context, base, id string) (int64, error) {
	a, err := c.do(ctx, http.MethodGet, base+"/accounts/"+id, "", nil)
	if err != nil {
		return 0, err
	}
	var acct transfers.Account
	if a.status != http.StatusOK {
		return 0, fmt.Errorf("GET /accounts/%s: %d %s", id, a.status, a.body)
	}
	if err := json.Unmarshal(a.body, &acct); err != nil {
		return 0, fmt.Errorf("GET /accounts/%s: %w", id, err)
	}
	return acct.Balance, nil
}
