package retrywithoutkey

import (
	"net/http"

	"github.com/go-resty/resty/v2"
	"github.com/hashicorp/go-retryablehttp"
)

var rc = resty.New().SetRetryCount(3)

func retryablePost(c *retryablehttp.Client, body []byte) {
	req, _ := retryablehttp.NewRequest("POST", "https://api.example/charges", body)
	c.Do(req) // want `POST sent through go-retryablehttp`
}

func retryablePostHelper(c *retryablehttp.Client, body []byte) {
	c.Post("https://api.example/charges", "application/json", body) // want `POST sent through go-retryablehttp`
}

func retryablePatch(c *retryablehttp.Client) {
	req, _ := retryablehttp.NewRequest(http.MethodPatch, "https://api.example/orders/1", nil)
	c.Do(req) // want `PATCH sent through go-retryablehttp`
}

func restyPost(body any) {
	rc.R().SetBody(body).Post("https://api.example/charges") // want `POST sent through go-resty with SetRetryCount`
}

func restyPatch(body any) {
	rc.R().SetBody(body).Patch("https://api.example/orders/1") // want `PATCH sent through go-resty`
}

// Near misses.

func retryableGet(c *retryablehttp.Client) {
	c.Get("https://api.example/orders") // nearmiss: a GET
}

func retryableKeyed(c *retryablehttp.Client, key string, body []byte) {
	req, _ := retryablehttp.NewRequest("POST", "https://api.example/charges", body)
	req.Header.Set("Idempotency-Key", key)
	c.Do(req) // nearmiss: keyed
}

func restyKeyed(key string, body any) {
	rc.R().SetHeader("Idempotency-Key", key).SetBody(body).Post("https://api.example/charges") // nearmiss: keyed
}

func restyGet() {
	rc.R().Get("https://api.example/orders") // nearmiss: a GET
}
