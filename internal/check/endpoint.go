package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Endpoint is what to audit and how. The zero value of each optional
// field means its default.
type Endpoint struct {
	// Name names the endpoint in a report. Optional.
	Name string
	// Method defaults to POST.
	Method string
	// URL is the request's target (a path is enough for HandlerDoer).
	URL string
	// Header is sent with every request: credentials, Content-Type. When
	// Body is JSON and Header has no Content-Type, application/json is
	// sent.
	Header http.Header
	// Body is the request the endpoint must accept (a 2xx).
	Body []byte
	// Body2 is the different request of rule 3. Defaults to Body with one
	// JSON member changed: its first number plus one, else its first
	// string with "-2" appended, else its first boolean negated.
	Body2 []byte
	// KeyHeader defaults to Idempotency-Key.
	KeyHeader string
	// Principal2 is a second principal's credential, for rule 7: each of
	// its headers replaces the header of that name in Header. Without it
	// rule 7 is SKIP.
	Principal2 http.Header
	// KeyOptional declares that the endpoint accepts requests without a
	// key: rule 5 then expects a 2xx instead of a 400.
	KeyOptional bool
	// Concurrency is how many requests rule 2 releases at once. Defaults
	// to 20; at least 2.
	Concurrency int
	// Effects counts the endpoint's effects (one per execution), such as
	// the number of rows it has created. Nil: executions are inferred from
	// the answers, which is weaker (see the package documentation). The
	// count must include an effect by the time its answer is received,
	// and nothing else may change it during the audit.
	Effects Counter
	// EffectsSource describes Effects in the report, such as "GET
	// http://…/transfers → count".
	EffectsSource string
	// Timeout bounds each request and each count. Defaults to 30 seconds.
	Timeout time.Duration
}

// Counter returns the current number of effects.
type Counter func(ctx context.Context) (int64, error)

// Defaults.
const (
	DefaultConcurrency = 20
	DefaultKeyHeader   = "Idempotency-Key"
	DefaultTimeout     = 30 * time.Second
)

func (e Endpoint) withDefaults() (Endpoint, error) {
	if e.Method == "" {
		e.Method = http.MethodPost
	}
	if e.KeyHeader == "" {
		e.KeyHeader = DefaultKeyHeader
	}
	e.KeyHeader = http.CanonicalHeaderKey(e.KeyHeader)
	if e.Concurrency == 0 {
		e.Concurrency = DefaultConcurrency
	}
	if e.Timeout == 0 {
		e.Timeout = DefaultTimeout
	}
	e.Header = e.Header.Clone()
	if e.Header == nil {
		e.Header = http.Header{}
	}
	if e.Header.Get("Content-Type") == "" && json.Valid(e.Body) {
		e.Header.Set("Content-Type", "application/json")
	}
	switch {
	case e.URL == "":
		return e, errors.New("check: Endpoint.URL is empty")
	case e.Concurrency < 2:
		return e, fmt.Errorf("check: Endpoint.Concurrency must be at least 2, got %d", e.Concurrency)
	case e.Timeout < 0:
		return e, fmt.Errorf("check: Endpoint.Timeout must not be negative, got %s", e.Timeout)
	case e.Header.Get(e.KeyHeader) != "":
		return e, fmt.Errorf("check: Endpoint.Header sets %s: the audit chooses the keys", e.KeyHeader)
	}
	return e, nil
}
