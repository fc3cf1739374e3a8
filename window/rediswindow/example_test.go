package rediswindow_test

import (
	"context"
	"log"
	"time"

	"github.com/idemkit/idem/window"
	"github.com/idemkit/idem/window/rediswindow"
	"github.com/redis/go-redis/v9"
)

// A consumer shares its window with the other processes of its queue
// through Redis, and runs each delivery through window.Do.
func Example() {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	w, err := rediswindow.New(c, &rediswindow.Config{
		Name:   "emails",         // every consumer of the queue uses the same name
		Lease:  30 * time.Second, // longer than a handler takes
		Window: 10 * time.Minute, // longer than the broker goes on redelivering
	})
	if err != nil {
		log.Fatal(err)
	}
	deliver := func(ctx context.Context, messageID string, ack, nak func()) {
		o, err := window.Do(ctx, w, messageID, func(ctx context.Context) error {
			return nil // send the email
		})
		if err != nil {
			log.Printf("message %s: %s: %v", messageID, o, err)
		}
		if o.Settled() {
			ack()
		} else {
			nak()
		}
	}
	deliver(context.Background(), "msg-1", func() {}, func() {})
}
