// Package retrywithoutkey is idemvet's corpus for the retrywithoutkey
// analyzer: one finding or near miss per function, marked by a comment
// "want" or "nearmiss".
package retrywithoutkey

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
)

func postLoop(c *http.Client, body []byte) (*http.Response, error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		req, _ := http.NewRequest("POST", "https://api.example/charges", bytes.NewReader(body))
		res, err := c.Do(req) // want `POST sent through a retry loop without an Idempotency-Key`
		if err == nil {
			return res, nil
		}
		last = err
		time.Sleep(time.Second)
	}
	return nil, last
}

func postFuncLoop(body []byte) {
	for range 3 {
		res, err := http.Post("https://api.example/charges", "application/json", bytes.NewReader(body)) // want `POST sent through a retry loop`
		if err == nil && res.StatusCode < 500 {
			return
		}
	}
}

func postFormLoop(c *http.Client, v url.Values) {
	for {
		if _, err := c.PostForm("https://api.example/signup", v); err == nil { // want `POST sent through a retry loop`
			break
		}
	}
}

func patchLoop(ctx context.Context, c *http.Client, body []byte) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPatch, "https://api.example/orders/1", bytes.NewReader(body))
	for i := 0; i < 5; i++ {
		res, err := c.Do(req) // want `PATCH sent through a retry loop`
		if err != nil {
			continue
		}
		if res.StatusCode < 500 {
			return
		}
	}
}

func postMethodConst(c *http.Client) {
	for range 4 {
		req, _ := http.NewRequest(http.MethodPost, "https://api.example/transfers", nil)
		if res, err := c.Do(req); err == nil && res.StatusCode == 201 { // want `POST sent through a retry loop`
			return
		}
	}
}

func reasonlessIgnore(c *http.Client) {
	for range 3 {
		req, _ := http.NewRequest("POST", "https://api.example/pings", nil)
		//idemvet:ignore
		if _, err := c.Do(req); err == nil { // want `POST sent through a retry loop`
			return
		}
	}
}

// Near misses.

func getLoop(c *http.Client) {
	for range 3 {
		req, _ := http.NewRequest("GET", "https://api.example/orders", nil)
		if _, err := c.Do(req); err == nil { // nearmiss: a GET is safe to retry
			return
		}
	}
}

func keyBeforeLoop(c *http.Client, body []byte) {
	req, _ := http.NewRequest("POST", "https://api.example/charges", bytes.NewReader(body))
	req.Header.Set("Idempotency-Key", uuid.NewString())
	for range 3 {
		if _, err := c.Do(req); err == nil { // nearmiss: keyed before the loop
			return
		}
	}
}

func singlePost(c *http.Client) {
	req, _ := http.NewRequest("POST", "https://api.example/charges", nil)
	c.Do(req) // nearmiss: sent once
}

func postPerItem(c *http.Client, items [][]byte) {
	for _, it := range items {
		req, _ := http.NewRequest("POST", "https://api.example/items", bytes.NewReader(it))
		if _, err := c.Do(req); err != nil { // nearmiss: one request per item, no retry
			return
		}
	}
}

func putLoop(c *http.Client) {
	for range 3 {
		req, _ := http.NewRequest("PUT", "https://api.example/orders/1", nil)
		if _, err := c.Do(req); err == nil { // nearmiss: PUT is idempotent by definition
			return
		}
	}
}

func keyFromCaller(c *http.Client, key string) {
	for range 3 {
		req, _ := http.NewRequest("POST", "https://api.example/charges", nil)
		req.Header.Set("Idempotency-Key", key)
		if _, err := c.Do(req); err == nil { // nearmiss: keyed by the caller's intent key
			return
		}
	}
}

func fanOut(c *http.Client, n int) {
	for range n {
		req, _ := http.NewRequest("POST", "https://api.example/pings", nil)
		c.Do(req) // nearmiss: n requests, none judged or retried
	}
}

func reasonedIgnore(c *http.Client) {
	for range 3 {
		req, _ := http.NewRequest("POST", "https://api.example/search", nil)
		//idemvet:ignore the search endpoint is a read sent as POST for its body
		if _, err := c.Do(req); err == nil { // nearmiss: silenced with a reason
			return
		}
	}
}
