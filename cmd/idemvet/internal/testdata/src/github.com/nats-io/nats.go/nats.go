// Package nats is a stub of github.com/nats-io/nats.go for idemvet's tests.
package nats

type Header map[string][]string

func (h Header) Set(k, v string) {}

type Msg struct {
	Subject string
	Data    []byte
	Header  Header
}

func NewMsg(subject string) *Msg { return &Msg{Subject: subject, Header: Header{}} }

type Conn struct{}

func (nc *Conn) Publish(subj string, data []byte) error { return nil }
func (nc *Conn) PublishMsg(m *Msg) error                { return nil }
func (h Header) Get(k string) string                    { return "" }
