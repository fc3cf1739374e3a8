package amqpinbox_test

import (
	"context"
	"encoding/json"
	"log"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/amqpinbox"
	"github.com/idemkit/idem/pgstore"
	amqp "github.com/rabbitmq/amqp091-go"
)

// A consumer of the queue "payments" that credits accounts once per
// message, however often RabbitMQ delivers it. The queue is declared (a
// quorum queue) on every connection if it is missing, dead-lettering to
// "payments.dead". Runnable against a local RabbitMQ and PostgreSQL;
// examples/rabbitconsumer is a complete program.
func ExampleConsumer_Run() {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, "postgres://postgres@127.0.0.1:5432/test", nil)
	if err != nil {
		log.Fatal(err)
	}
	ib, err := inbox.New(store, &inbox.Config{Name: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	credit := func(ctx context.Context, m *inbox.Message) error {
		var p struct {
			Account string `json:"account"`
			Amount  int64  `json:"amount"`
		}
		if err := json.Unmarshal(m.Body, &p); err != nil {
			return inbox.Refuse(err) // can never succeed: settle it
		}
		tx, _ := pgstore.TxFrom(ctx) // the inbox's transaction
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, p.Amount, p.Account)
		return err // an error rolls back, and the message comes again
	}
	c, err := amqpinbox.New(ib, credit, &amqpinbox.Config{
		Setup: func(_ context.Context, conn *amqp.Connection) error {
			if _, err := amqpinbox.DeclareQueue(conn, "payments.dead", nil); err != nil {
				return err
			}
			_, err := amqpinbox.DeclareQueue(conn, "payments", amqp.Table{
				"x-dead-letter-exchange":    "",
				"x-dead-letter-routing-key": "payments.dead",
			})
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Until ctx ends, reconnecting when the connection is lost.
	if err := c.Run(ctx, "amqp://guest:guest@127.0.0.1:5672/", "payments"); err != nil {
		log.Fatal(err)
	}
}

// A producer publishes with an id made once per intent, and publishes
// again with the same id whenever Publish fails: the consumer's inbox
// applies the message once.
func ExamplePublish() {
	ctx := context.Background()
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"account":"alice","amount":100}`)
	const id = "payment-7f3c" // made when the user confirmed, stored with the intent
	for {
		err := amqpinbox.Publish(ctx, ch, "", "payments", amqp.Publishing{ContentType: "application/json", Body: body}, id)
		if err == nil {
			break
		}
		log.Print(err) // retry with the same id (on a new channel if this one closed)
		time.Sleep(time.Second)
	}
}
