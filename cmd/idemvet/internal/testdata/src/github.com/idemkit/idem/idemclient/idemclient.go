// Package idemclient is a stub of idem's idemclient for idemvet's tests.
package idemclient

import (
	"context"
	"net/http"
)

type Client struct{}

type Intent struct {
	Key, Method, URL string
	Header           http.Header
	Body             []byte
}

type Response struct{ StatusCode int }

func (c *Client) NewIntent(method, url string, body []byte) (*Intent, error) { return &Intent{}, nil }
func (c *Client) Do(ctx context.Context, in *Intent) (*Response, error)      { return &Response{}, nil }
