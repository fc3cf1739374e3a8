package natsinbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/nats-io/nats.go/jetstream"
)

// Consume receives cons's messages and runs each through Handle with ib
// and h, one at a time, until ctx ends; it then stops pulling, hands the
// messages it had received but not begun back to the server (nak), lets
// the one in hand finish, and returns nil. To handle several messages at
// once, run Consume in several goroutines or processes on one consumer.
//
// The consumer must acknowledge explicitly (jetstream.AckExplicitPolicy)
// and must not stop delivering a message before the inbox gives up on it:
// its MaxDeliver is unlimited (-1) or at least the inbox's MaxAttempts.
// Consume refuses a consumer that does neither. A lost server is waited
// for (the connection reconnects; see nats.MaxReconnects); Consume returns
// an error when consumption stops for another reason, such as a deleted
// consumer or a closed connection.
func Consume(ctx context.Context, cons jetstream.Consumer, ib *inbox.Inbox, h inbox.Handler, cfg *Config) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	switch {
	case cons == nil:
		return errors.New("natsinbox: Consume: the consumer is nil")
	case ib == nil:
		return errors.New("natsinbox: Consume: the inbox is nil")
	case h == nil:
		return errors.New("natsinbox: Consume: the handler is nil")
	}
	info := cons.CachedInfo()
	if info == nil {
		if info, err = cons.Info(ctx); err != nil {
			return fmt.Errorf("natsinbox: Consume: %w", err)
		}
	}
	if err := check(info, ib); err != nil {
		return err
	}
	if c.InProgressEvery == 0 {
		c.InProgressEvery = DefaultInProgressEvery
		if w := info.Config.AckWait; w > 0 {
			c.InProgressEvery = max(w/3, 10*time.Millisecond)
		}
	}
	var (
		mu       sync.Mutex
		lastErr  error
		handBack []jetstream.Msg
	)
	c.shutdownNak = func(msg jetstream.Msg) {
		mu.Lock()
		handBack = append(handBack, msg)
		mu.Unlock()
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if _, err := c.handle(ctx, ib, msg, h); err != nil && settleFailed(err) {
			c.log(ctx, "natsinbox: settling a message failed; the server delivers it again", err)
		}
	},
		jetstream.PullMaxMessages(c.Prefetch),
		jetstream.PullExpiry(c.PullExpiry),
		jetstream.PullHeartbeat(c.PullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			mu.Lock()
			lastErr = err
			mu.Unlock()
			c.log(ctx, "natsinbox: consuming", err)
		}),
	)
	if err != nil {
		return fmt.Errorf("natsinbox: Consume: %w", err)
	}
	closed := cc.Closed()
	select {
	case <-ctx.Done():
		// Drain: the messages already received reach the callback,
		// which sets them aside since ctx has ended, as it does the
		// one in hand. They are naked once the subscription is gone:
		// a nak sent before would have the server deliver the message
		// again to this consumer's pull request, where nobody takes it
		// before AckWait.
		cc.Drain()
		select {
		case <-closed:
		case <-time.After(drainTimeout):
			cc.Stop()
		}
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range handBack {
			if err := msg.Nak(); err != nil {
				c.log(ctx, "natsinbox: handing a message back at shutdown failed; the server delivers it again after AckWait", err)
			}
		}
		return nil
	case <-closed:
		mu.Lock()
		defer mu.Unlock()
		if lastErr == nil {
			lastErr = errors.New("consumption stopped")
		}
		return fmt.Errorf("natsinbox: Consume: %w", lastErr)
	}
}

// drainTimeout bounds the wait for the message in hand at shutdown.
const drainTimeout = 10 * time.Second

// check refuses a consumer on which the inbox cannot keep its promises.
func check(info *jetstream.ConsumerInfo, ib *inbox.Inbox) error {
	cfg := info.Config
	if cfg.AckPolicy != jetstream.AckExplicitPolicy {
		return fmt.Errorf("natsinbox: Consume: consumer %q acknowledges %s; the inbox needs explicit acks (jetstream.AckExplicitPolicy)", info.Name, cfg.AckPolicy)
	}
	if cfg.MaxDeliver > 0 && cfg.MaxDeliver < ib.MaxAttempts() {
		return fmt.Errorf("natsinbox: Consume: consumer %q stops delivering a message after %d deliveries, before the inbox's MaxAttempts (%d) dead-letters it: set its MaxDeliver to -1 or at least %d", info.Name, cfg.MaxDeliver, ib.MaxAttempts(), ib.MaxAttempts())
	}
	return nil
}

func settleFailed(err error) bool {
	var e *settleError
	return errors.As(err, &e)
}

func (c *Config) log(ctx context.Context, msg string, err error) {
	if c.Logger != nil {
		c.Logger.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("error", err.Error()))
	}
}
