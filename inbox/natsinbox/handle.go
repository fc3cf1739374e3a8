package natsinbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/nats-io/nats.go/jetstream"
)

// Handle runs h for one JetStream message through ib, then settles the
// message on the server: an ack after the commit for Applied, Duplicate
// and Refused (Config.DoubleAck to wait for the server's confirmation), a
// nak with Config.Backoff for Retry (a nak without delay when ctx has
// ended, so that another consumer takes the message at once), Term for
// DeadLetter (after Config.DeadLetter, if set). While h runs, the server
// is told the message is in progress every Config.InProgressEvery.
//
// It is for consumers that run their own loop (Fetch, Messages, Next);
// Consume calls it for each message. The inbox.Message that h receives
// has the message's id (Config.MessageID), body, headers, delivery count
// as Attempt, and the jetstream.Msg as Raw.
//
// The error says why a message was not applied (the handler's, the
// store's, the refusal), or that settling it failed; it is nil for
// Applied and Duplicate settled as they should be. Handle does nothing to
// the message when cfg is invalid or the message is not a JetStream one.
func Handle(ctx context.Context, ib *inbox.Inbox, msg jetstream.Msg, h inbox.Handler, cfg *Config) (inbox.Outcome, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return inbox.Retry, err
	}
	if c.InProgressEvery == 0 {
		c.InProgressEvery = DefaultInProgressEvery
	}
	return c.handle(ctx, ib, msg, h)
}

// handle is Handle with the defaults applied.
func (c *Config) handle(ctx context.Context, ib *inbox.Inbox, msg jetstream.Msg, h inbox.Handler) (inbox.Outcome, error) {
	switch {
	case ib == nil:
		return inbox.Retry, errors.New("natsinbox: the inbox is nil")
	case msg == nil:
		return inbox.Retry, errors.New("natsinbox: the message is nil")
	}
	meta, err := msg.Metadata()
	if err != nil {
		return inbox.Retry, fmt.Errorf("natsinbox: %w", err)
	}
	if ctx.Err() != nil {
		// Shutting down with the message in hand: hand it to another
		// consumer now rather than after AckWait.
		return inbox.Retry, errors.Join(ctx.Err(), c.handBack(msg))
	}
	m := &inbox.Message{
		Body:    msg.Data(),
		Header:  map[string][]string(msg.Headers()),
		Attempt: int(min(meta.NumDelivered, 1<<31-1)),
		Raw:     msg,
	}
	id, idErr := c.messageID(msg, meta)
	if idErr == nil {
		m.ID = id
	}
	stop := inProgress(msg, c.InProgressEvery)
	o, err := ib.Process(ctx, m, h)
	stop()
	if idErr != nil {
		err = fmt.Errorf("natsinbox: message id: %w (%w)", idErr, err)
	}
	if c.afterProcess != nil {
		c.afterProcess(o)
	}
	return o, errors.Join(err, c.settle(ctx, msg, m.Attempt, o, err))
}

// messageID returns the id Process records the message under; "" when it
// has none.
func (c *Config) messageID(msg jetstream.Msg, meta *jetstream.MsgMetadata) (string, error) {
	if c.MessageID != nil {
		return c.MessageID(msg)
	}
	if id := msg.Headers().Get(jetstream.MsgIDHeader); id != "" {
		return id, nil
	}
	if c.FallbackToSequence {
		return meta.Stream + ":" + strconv.FormatUint(meta.Sequence.Stream, 10), nil
	}
	return "", nil
}

// settle tells the server what became of the message.
func (c *Config) settle(ctx context.Context, msg jetstream.Msg, attempt int, o inbox.Outcome, reason error) error {
	switch {
	case o.Settled() && c.DoubleAck:
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		defer cancel()
		return settleErr("ack", msg.DoubleAck(actx))
	case o.Settled():
		return settleErr("ack", msg.Ack())
	case o == inbox.DeadLetter:
		if c.DeadLetter != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
			defer cancel()
			if err := c.DeadLetter(dctx, msg, reason); err != nil {
				// Not terminated unless its copy is kept: deliver it
				// again, and dead-letter it again then.
				return errors.Join(settleErr("dead letter", err), settleErr("nak", msg.NakWithDelay(c.Backoff(attempt))))
			}
		}
		// Term, not TermWithReason: servers before 2.10.4 ignore a Term
		// with a reason and deliver the message again.
		return settleErr("term", msg.Term())
	case ctx.Err() != nil:
		return c.handBack(msg)
	default:
		return settleErr("nak", msg.NakWithDelay(c.Backoff(attempt)))
	}
}

// settleError is a failure to tell the server what became of a message.
type settleError struct {
	op  string
	err error
}

func (e *settleError) Error() string { return "natsinbox: " + e.op + ": " + e.err.Error() }
func (e *settleError) Unwrap() error { return e.err }

// handBack returns a message the consumer is shutting down with to the
// server (a nak without delay), or, in Consume, has it returned once the
// subscription is gone (see Consume).
func (c *Config) handBack(msg jetstream.Msg) error {
	if c.shutdownNak != nil {
		c.shutdownNak(msg)
		return nil
	}
	return settleErr("nak", msg.Nak())
}

func settleErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return &settleError{op, err}
}

// inProgress tells the server every d, until stop is called, that msg is
// being worked on. stop returns once no InProgress can be sent any more,
// so that none follows the ack. It starts no goroutine unless d elapses:
// a handler quicker than d costs a timer.
func inProgress(msg jetstream.Msg, d time.Duration) (stop func()) {
	p := &progress{msg: msg, every: d}
	p.mu.Lock()
	p.timer = time.AfterFunc(d, p.fire)
	p.mu.Unlock()
	return p.stop
}

type progress struct {
	msg     jetstream.Msg
	every   time.Duration
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func (p *progress) fire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	_ = p.msg.InProgress() // a publish: it does not wait for the server
	p.timer.Reset(p.every)
}

func (p *progress) stop() {
	p.mu.Lock()
	p.stopped = true
	p.timer.Stop()
	p.mu.Unlock()
}
