// Package foreigncorpus is foreigneffect's corpus: small programs in the
// shapes a service takes, one case a func. "// want" marks a true
// positive, "// nearmiss" a program that must not be reported.
package foreigncorpus

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"example.com/pb"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/sqlitestore"
	"google.golang.org/grpc"
)

type Service struct {
	HTTP     *http.Client
	Payments pb.PaymentsClient
	Conn     *grpc.ClientConn
	ConnI    grpc.ClientConnInterface
	Guard    *idem.Guard
	Leased   *idem.Leased
	MW       *idemhttp.Middleware
	Inbox    *inbox.Inbox
}

func (s *Service) Checkout(ctx context.Context, key string, amount int) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqlitestore.TxFrom(ctx)
		tx.ExecContext(ctx, "INSERT INTO orders VALUES (?)", key)
		_, err := s.Payments.Charge(ctx, &pb.ChargeRequest{Amount: amount}) // want `pb.PaymentsClient.Charge`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) SendReceipt(ctx context.Context, key, email string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		body, _ := json.Marshal(map[string]string{"to": email})
		_, err := s.HTTP.Post("https://mail.internal/send", "application/json", bytes.NewReader(body)) // want `\(\*http.Client\).Post`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) NotifyWebhook(ctx context.Context, key, target string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
		if err != nil {
			return idem.Result{}, err
		}
		resp, err := s.HTTP.Do(req) // want `\(\*http.Client\).Do`
		if err != nil {
			return idem.Result{}, err
		}
		resp.Body.Close()
		return idem.Result{}, nil
	})
	return err
}

func (s *Service) PingPartner(ctx context.Context, key string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		_, err := http.Get("https://partner.example/ping?order=" + key) // want `http.Get`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) SubscribeNewsletter(ctx context.Context, key, email string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		_, err := http.PostForm("https://news.example/sub", url.Values{"email": {email}}) // want `http.PostForm`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) RawInvoke(ctx context.Context, key string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		var out pb.ChargeReply
		err := s.ConnI.Invoke(ctx, "/pb.Payments/Charge", &pb.ChargeRequest{}, &out) // want `grpc.ClientConnInterface.Invoke`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) StreamEvents(ctx context.Context, key string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		_, err := s.Conn.NewStream(ctx, &grpc.StreamDesc{}, "/pb.Events/Push") // want `grpc.ClientConn.NewStream`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) PayHandler() http.Handler {
	return s.MW.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.Payments.Charge(r.Context(), &pb.ChargeRequest{Amount: 5}); err != nil { // want `in handler given to Middleware.Handler`
			http.Error(w, err.Error(), 502)
		}
	}))
}

func (s *Service) HandleOrderPlaced(ctx context.Context, m *inbox.Message) error {
	_, err := http.Post("https://crm.example/orders", "text/plain", bytes.NewReader([]byte(m.ID))) // want `http.Post`
	return err
}

func (s *Service) ConsumeOrders(ctx context.Context, m *inbox.Message) {
	s.Inbox.Process(ctx, m, s.HandleOrderPlaced)
}

func (s *Service) SyncContacts(ctx context.Context, items []batch.Item[string]) error {
	_, err := batch.Run(ctx, s.Guard, nil, items, func(ctx context.Context, it batch.Item[string]) (idem.Result, error) {
		_, err := s.HTTP.Get("https://crm.example/contacts/" + it.Body) // want `\(\*http.Client\).Get`
		return idem.Result{}, err
	})
	return err
}

func (s *Service) callShipping(ctx context.Context) error {
	_, err := http.DefaultClient.Post("https://ship.example/labels", "text/plain", nil) // want `in callShipping, called from`
	return err
}

func (s *Service) CreateLabel(ctx context.Context, key string) error {
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		return idem.Result{}, s.callShipping(ctx)
	})
	return err
}

func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.HTTP.Head("https://cdn.example/purge") // want `\(\*http.Client\).Head`
}

func (s *Service) Routes() http.Handler {
	return s.MW.Route(idemhttp.RouteOptions{})(s)
}

// Near misses.

func (s *Service) CheckoutLeased(ctx context.Context, key string, amount int) error { // nearmiss
	_, _, err := s.Leased.Do(ctx, idem.LeasedRequest{Key: key}, func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		_, err := run.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
			_, err := s.Payments.Charge(ctx, &pb.ChargeRequest{Amount: amount})
			return nil, err
		})
		return idem.Result{}, err
	})
	return err
}

func (s *Service) ReceiptRoute() http.Handler { // nearmiss
	return s.MW.Route(idemhttp.RouteOptions{Leased: true, Kind: "receipt"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		run, _ := idem.RunFrom(r.Context())
		run.Step(r.Context(), "mail", func(ctx context.Context) ([]byte, error) {
			req, _ := http.NewRequestWithContext(ctx, "POST", "https://mail.internal/send", nil)
			req.Header.Set("Idempotency-Key", run.DerivedKey("mail"))
			_, err := s.HTTP.Do(req)
			return nil, err
		})
	}))
}

func (s *Service) FetchRates(ctx context.Context) error { // nearmiss
	_, err := s.HTTP.Get("https://rates.example/today")
	return err
}

func (s *Service) PrepareRequest(ctx context.Context, key string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", "https://x.example/", nil)
		if err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Body: []byte(req.URL.String())}, nil
	})
	return err
}

func (s *Service) QuoteInWork(ctx context.Context, key string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		_ = pb.Quote{}.Price(ctx)
		return idem.Result{}, nil
	})
	return err
}

func (s *Service) DialOutside(ctx context.Context) error { // nearmiss
	_, err := s.Payments.Charge(ctx, &pb.ChargeRequest{Amount: 1})
	return err
}

func (s *Service) IgnoredPing(ctx context.Context, key string) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		//idemvet:ignore a read-only lookup at a partner, safe to repeat
		_, err := s.HTTP.Get("https://partner.example/lookup")
		return idem.Result{}, err
	})
	return err
}

func (s *Service) Register() error { // nearmiss
	return s.Leased.Register("export", func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		_, err := run.Step(ctx, "upload", func(ctx context.Context) ([]byte, error) {
			_, err := s.HTTP.Post("https://store.example/put", "text/plain", nil)
			return nil, err
		})
		return idem.Result{}, err
	})
}

func (s *Service) PlainHandler() http.Handler { // nearmiss
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.HTTP.Get("https://x.example/")
	})
}

func (s *Service) AfterCommit(ctx context.Context, key string) error { // nearmiss
	res, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqlitestore.TxFrom(ctx)
		_, err := tx.ExecContext(ctx, "INSERT INTO outbox VALUES (?)", key)
		return idem.Result{}, err
	})
	if err == nil {
		_, err = s.HTTP.Post("https://relay.example/", "text/plain", bytes.NewReader(res.Body))
	}
	return err
}

func (s *Service) DecodeOnly(ctx context.Context, key string, r *http.Request) error { // nearmiss
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, func(ctx context.Context) (idem.Result, error) {
		var v map[string]any
		err := json.NewDecoder(r.Body).Decode(&v)
		return idem.Result{}, err
	})
	return err
}

func (s *Service) NamedWorkCall(ctx context.Context, key string) error {
	work := func(ctx context.Context) (idem.Result, error) {
		_, err := s.HTTP.Get("https://partner.example/confirm") // want `\(\*http.Client\).Get`
		return idem.Result{}, err
	}
	_, _, err := s.Guard.Do(ctx, idem.Request{Key: key}, work)
	return err
}
