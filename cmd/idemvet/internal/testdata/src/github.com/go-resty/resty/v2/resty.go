// Package resty is a stub of github.com/go-resty/resty/v2.
package resty

type Client struct{}
type Request struct{}
type Response struct{}

func New() *Client                                     { return &Client{} }
func (c *Client) SetRetryCount(n int) *Client          { return c }
func (c *Client) R() *Request                          { return &Request{} }
func (r *Request) SetHeader(k, v string) *Request      { return r }
func (r *Request) SetBody(b any) *Request              { return r }
func (r *Request) Post(url string) (*Response, error)  { return &Response{}, nil }
func (r *Request) Patch(url string) (*Response, error) { return &Response{}, nil }
func (r *Request) Get(url string) (*Response, error)   { return &Response{}, nil }
