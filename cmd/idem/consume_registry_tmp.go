package main

// TEMPORARY: a copy of the registry that cmd/idem/consume.go (the inbox
// helper's branch) declares, so that consume_nats.go builds and is tested
// on this branch. Deleted before the final commit.

import (
	"context"
	"log/slog"

	"github.com/idemkit/idem/inbox"
)

type consumeParams struct {
	URL     string        // the -consume URL, as given
	Queue   string        // -consume-queue; "transfers" by default
	Inbox   *inbox.Inbox  // records message ids with the transfers' effects
	Handler inbox.Handler // applies one transfer command
	Logger  *slog.Logger
}

type consumeSource func(ctx context.Context, p consumeParams) (run func(ctx context.Context) error, err error)

var consumeSources = map[string]consumeSource{}
