package foreign

import (
	"context"
	"net/http"
	"strings"

	"example.com/pb"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/inbox"
	"google.golang.org/grpc"
)

type server struct {
	hc  *http.Client
	pay pb.PaymentsClient
	cc  *grpc.ClientConn
	g   *idem.Guard
}

func (s *server) clientDo(ctx context.Context, req *http.Request) {
	s.g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		_, err := s.hc.Do(req) // want `outbound HTTP call \(\*http.Client\).Do in work given to Guard.Do is an effect the transaction cannot roll back: run the work in leased mode \(idem.Leased\) and make the call in a Run.Step, sending the step's Run.DerivedKey`
		return idem.Result{}, err
	})
}

func pkgFuncs(ctx context.Context, g *idem.Guard) {
	g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		http.Post("http://mail/send", "text/plain", strings.NewReader("hi")) // want `outbound HTTP call http.Post`
		http.DefaultClient.Get("http://x/")                                  // want `\(\*http.Client\).Get`
		return idem.Result{}, nil
	})
}

func (s *server) grpcCalls(ctx context.Context) {
	s.g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		s.pay.Charge(ctx, &pb.ChargeRequest{Amount: 1})   // want `outbound gRPC call pb.PaymentsClient.Charge`
		s.cc.Invoke(ctx, "/pb.Payments/Charge", nil, nil) // want `outbound gRPC call grpc.ClientConn.Invoke`
		_ = pb.Quote{}.Price(ctx)                         // not a client
		return idem.Result{}, nil
	})
}

func (s *server) notify(ctx context.Context) error {
	_, err := s.hc.Get("http://hooks/") // want `in notify, called from work given to Guard.Do`
	return err
}

func (s *server) viaHelper(ctx context.Context) {
	s.g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		return idem.Result{}, s.notify(ctx)
	})
}

func (s *server) kinds(ctx context.Context, m *idemhttp.Middleware, ib *inbox.Inbox) {
	m.Optional(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hc.Get("http://a/") // want `in handler given to Middleware.Optional`
	}))
	ib.Process(ctx, &inbox.Message{}, func(ctx context.Context, m *inbox.Message) error {
		_, err := s.hc.Get("http://b/") // want `in inbox handler given to Inbox.Process`
		return err
	})
	batch.Run(ctx, s.g, nil, []batch.Item[string]{}, func(ctx context.Context, it batch.Item[string]) (idem.Result, error) {
		_, err := s.hc.Get("http://c/" + it.Body) // want `in batch row func given to batch.Run`
		return idem.Result{}, err
	})
}

// The false positives a reviewer would reject.

func (s *server) leasedStep(ctx context.Context, l *idem.Leased) {
	l.Do(ctx, idem.LeasedRequest{}, func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		_, err := run.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
			req, _ := http.NewRequestWithContext(ctx, "POST", "http://pay/", nil)
			req.Header.Set("Idempotency-Key", run.DerivedKey("charge"))
			_, err := s.hc.Do(req)
			return nil, err
		})
		return idem.Result{}, err
	})
}

func (s *server) leasedRoute(m *idemhttp.Middleware) {
	m.Route(idemhttp.RouteOptions{Leased: true, Kind: "charge"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		run, _ := idem.RunFrom(r.Context())
		run.Step(r.Context(), "charge", func(ctx context.Context) ([]byte, error) {
			_, err := s.hc.Get("http://pay/")
			return nil, err
		})
	}))
}

func (s *server) outside(ctx context.Context) error {
	_, err := s.hc.Get("http://x/")
	return err
}

func (s *server) ignored(ctx context.Context) {
	s.g.Do(ctx, idem.Request{}, func(ctx context.Context) (idem.Result, error) {
		s.hc.Get("http://metrics/") //idemvet:ignore a best-effort metrics ping, repeated harmlessly
		//idemvet:ignore
		s.hc.Get("http://metrics/") // want `\(\*http.Client\).Get`
		return idem.Result{}, nil
	})
}
