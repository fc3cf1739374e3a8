package amqptest

import (
	"net"
	"net/url"
	"strconv"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem/internal/faultproxy"
)

// Proxy calls Require and starts a fault proxy in front of the broker,
// closed at t's clean-up, so that a test can cut its connections as a
// broker restart or a network fault does without touching the shared
// broker. It returns the proxy and the broker's URL with the proxy's
// address in place of the broker's.
func Proxy(t testing.TB) (*faultproxy.Proxy, string) {
	t.Helper()
	broker := Require(t)
	uri, err := amqp.ParseURI(broker) // fills in the scheme's port
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.New(t, net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)))
	u, err := url.Parse(broker)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return p, u.String()
}
