package natsinbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publish publishes data to subject with key as its Nats-Msg-Id and waits
// for the stream's acknowledgement. key names the intent, not the attempt
// (1 to 255 visible ASCII characters): publish again with the same key
// after an error or a timeout, and the stream drops the copy if the first
// attempt was stored within its duplicate window (PubAck.Duplicate is then
// true), while the consumer's inbox drops any copy that arrives later. opts
// are passed on to jetstream; a WithMsgID among them is overridden by key.
func Publish(ctx context.Context, js jetstream.JetStream, subject string, data []byte, key string, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if err := idem.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("natsinbox: Publish: key: %w", err)
	}
	opts = append(opts[:len(opts):len(opts)], jetstream.WithMsgID(key))
	return js.Publish(ctx, subject, data, opts...)
}

// Headers that RepublishTo adds to a dead-lettered message's copy.
const (
	DeadLetterReasonHeader   = "Idem-Dead-Letter-Reason"
	DeadLetterStreamHeader   = "Idem-Dead-Letter-Stream"
	DeadLetterSequenceHeader = "Idem-Dead-Letter-Sequence"
	DeadLetterSubjectHeader  = "Idem-Dead-Letter-Subject"
)

// RepublishTo returns a Config.DeadLetter that publishes a copy of each
// dead-lettered message to subject through js and waits for the stream's
// acknowledgement, so that a message is terminated only once its copy is
// stored: a subject that no stream captures keeps the message delivered
// again. The copy has the message's body and headers (its Nats-Msg-Id too,
// so that a dead-letter stream drops a second copy within its window),
// and the reason, the original stream, stream sequence and subject in the
// Idem-Dead-Letter-* headers. It panics if js is nil or subject is empty.
func RepublishTo(js jetstream.JetStream, subject string) func(ctx context.Context, msg jetstream.Msg, reason error) error {
	if js == nil || subject == "" {
		panic("natsinbox: RepublishTo needs a JetStream and a subject")
	}
	return func(ctx context.Context, msg jetstream.Msg, reason error) error {
		out := nats.NewMsg(subject)
		out.Data = msg.Data()
		for k, vs := range msg.Headers() {
			if republished(k) {
				out.Header[k] = vs
			}
		}
		text := "dead letter"
		if reason != nil {
			text = reason.Error()
		}
		out.Header.Set(DeadLetterReasonHeader, headerValue(text))
		out.Header.Set(DeadLetterSubjectHeader, msg.Subject())
		if meta, err := msg.Metadata(); err == nil {
			out.Header.Set(DeadLetterStreamHeader, meta.Stream)
			out.Header.Set(DeadLetterSequenceHeader, strconv.FormatUint(meta.Sequence.Stream, 10))
		}
		_, err := js.PublishMsg(ctx, out)
		return err
	}
}

// republished reports whether a header of a dead-lettered message is
// copied: not those that would make the server check or change the
// dead-letter stream (expectations, roll-ups, per-message TTLs).
func republished(key string) bool {
	k := strings.ToLower(key)
	return !strings.HasPrefix(k, "nats-expected-") && k != "nats-rollup" && k != "nats-ttl"
}

// maxReason bounds the reason header.
const maxReason = 1024

// headerValue makes s a valid header value: one line, bounded.
func headerValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxReason {
		s = strings.ToValidUTF8(s[:maxReason], "")
	}
	return s
}
