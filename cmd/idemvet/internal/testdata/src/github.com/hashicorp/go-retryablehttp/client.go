// Package retryablehttp is a stub of github.com/hashicorp/go-retryablehttp.
package retryablehttp

import "net/http"

type Logger interface{}

type Client struct {
	HTTPClient     *http.Client
	RetryMax       int
	RequestLogHook func(Logger, *http.Request, int)
	PrepareRetry   func(*http.Request) error
}

type Request struct{ *http.Request }

func NewClient() *Client                                                      { return &Client{} }
func NewRequest(method, url string, body any) (*Request, error)               { return &Request{}, nil }
func (c *Client) Do(req *Request) (*http.Response, error)                     { return nil, nil }
func (c *Client) Post(url, bodyType string, body any) (*http.Response, error) { return nil, nil }
func (c *Client) Get(url string) (*http.Response, error)                      { return nil, nil }
