package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem/inbox"
)

// consumeParams are what a broker's consumer gets from idem serve -consume.
type consumeParams struct {
	URL     string        // the -consume URL, as given
	Queue   string        // -consume-queue; "transfers" by default
	Inbox   *inbox.Inbox  // records message ids with the transfers' effects
	Handler inbox.Handler // applies one transfer command
	Logger  *slog.Logger
}

// consumeSource opens a broker's consumer: it creates the stream or queue if
// absent and returns run, which consumes until ctx ends (reconnecting as
// needed) and returns nil then.
type consumeSource func(ctx context.Context, p consumeParams) (run func(ctx context.Context) error, err error)

// consumeSources holds the sources by URL scheme; serve_consume_nats.go and
// serve_consume_amqp.go register theirs in init.
var consumeSources = map[string]consumeSource{}

// Defaults of idem serve -consume.
const (
	defaultConsumeQueue = "transfers"
	// consumerName names the inbox of the transfer commands, whatever the
	// queue or the broker: a command id takes effect once in the ledger,
	// whichever way it arrives.
	consumerName = "transfers"
)

// consumeSchemes lists the registered schemes, sorted.
func consumeSchemes() []string {
	s := make([]string, 0, len(consumeSources))
	for k := range consumeSources {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// consumeSourceFor returns the source of a -consume URL, or a usage error
// naming the supported schemes.
func consumeSourceFor(raw string) (consumeSource, error) {
	supported := "none in this build"
	if s := consumeSchemes(); len(s) > 0 {
		supported = strings.Join(s, ", ")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, usageError{fmt.Sprintf("serve: -consume must be a broker URL such as nats://127.0.0.1:4222 or amqp://guest:guest@127.0.0.1:5672/, got %q (supported schemes: %s)", redactURL(raw), supported)}
	}
	src, ok := consumeSources[strings.ToLower(u.Scheme)]
	if !ok {
		return nil, usageError{fmt.Sprintf("serve: -consume: unknown scheme %q (supported schemes: %s)", u.Scheme, supported)}
	}
	return src, nil
}

// maxQueueName bounds -consume-queue, in bytes.
const maxQueueName = 64

// validQueueName reports whether name is 1 to maxQueueName ASCII letters,
// digits, - and _: a NATS subject token and stream name, and an AMQP queue
// name, alike.
func validQueueName(name string) bool {
	if name == "" || len(name) > maxQueueName {
		return false
	}
	for i := range len(name) {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// redactURL hides the passwords of a broker URL, or of a comma-separated
// list of them (a NATS cluster), for logs and errors.
func redactURL(raw string) string {
	urls := strings.Split(raw, ",")
	for i, s := range urls {
		s = strings.TrimSpace(s)
		u, err := url.Parse(s)
		if err != nil {
			urls[i] = "(unparsable URL)"
			continue
		}
		hidden := false
		if u.User != nil {
			hidden = true
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			} else {
				// A user without a password is a token to NATS
				// (nats://token@host): hidden whole.
				u.User = url.User("xxxxx")
			}
		}
		q := u.Query()
		for k := range q {
			if secretParam(k) {
				q.Set(k, "xxxxx")
				hidden = true
			}
		}
		if !hidden {
			urls[i] = s // as given, even without a host ("nats://")
			continue
		}
		u.RawQuery = q.Encode()
		urls[i] = u.String()
	}
	return strings.Join(urls, ",")
}

// secretParam reports whether a URL query parameter named k may hold a
// credential.
func secretParam(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"pass", "token", "secret", "key", "cred", "auth"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// consumer is a source's run going on in the background.
type consumer struct {
	cmd  string        // "idem serve", "idem project": the prefix of its log lines
	done chan struct{} // closed when run has returned
	err  error         // run's error, set before done is closed
}

// startConsumer runs run in the background until ctx ends, and logs its
// end as the command cmd ("idem serve").
func startConsumer(ctx context.Context, cmd string, run func(ctx context.Context) error, log *slog.Logger) *consumer {
	c := &consumer{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = run(ctx)
		switch {
		case c.err != nil:
			log.Error(c.cmd+": the consumer stopped", "err", c.err)
		case ctx.Err() == nil:
			c.err = errors.New("the consumer stopped on its own")
			log.Error(c.cmd + ": the consumer stopped on its own")
		default:
			log.Info(c.cmd + ": the consumer stopped")
		}
	}()
	return c
}

// wait waits for the consumer to end, at most d.
func (c *consumer) wait(d time.Duration, log *slog.Logger) {
	select {
	case <-c.done:
	case <-time.After(d):
		log.Warn(c.cmd + ": the consumer did not stop within " + d.String() + "; its unacknowledged messages will be delivered again")
	}
}
