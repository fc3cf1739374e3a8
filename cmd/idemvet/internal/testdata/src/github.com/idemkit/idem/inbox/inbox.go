// Package inbox is a stub for idemvet's tests.
package inbox

import "context"

type Message struct{ ID string }

type Handler func(ctx context.Context, m *Message) error

type Outcome int

type Inbox struct{}

func (ib *Inbox) Process(ctx context.Context, m *Message, h Handler) (Outcome, error) {
	return 0, h(ctx, m)
}
