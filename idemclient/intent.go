package idemclient

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpwire"
)

// An Intent is one thing the application decided to do, such as one
// transfer the user confirmed. It holds the idempotency key and the complete
// request; every attempt to carry it out sends exactly that request with
// exactly that key. Create it with Client.NewIntent at the moment of the
// decision, never per attempt.
//
// An Intent is plain data so that a Journal can persist it. Do not change
// it after its first attempt: a retry with another body and the same key is
// rejected by the server (422), and one with another key is a new intent.
type Intent struct {
	// Key is the idempotency key, sent as the Idempotency-Key header.
	Key string `json:"key"`

	// Method is the request method, for example "POST".
	Method string `json:"method"`

	// URL is the absolute http or https URL of the request.
	URL string `json:"url"`

	// Header holds the request headers sent on every attempt. An
	// Idempotency-Key header here is replaced by Key.
	Header http.Header `json:"header,omitempty"`

	// Body is the request body, sent identically on every attempt.
	Body []byte `json:"body,omitempty"`

	// CreatedAt is when the intent was made. A zero value is set to the
	// current time by the first Client.Do.
	CreatedAt time.Time `json:"created_at"`
}

func (in *Intent) validate() error {
	if in == nil {
		return fmt.Errorf("idemclient: intent is nil")
	}
	if err := idem.ValidateKey(in.Key); err != nil {
		return fmt.Errorf("idemclient: Intent.Key: %w", err)
	}
	if !httpwire.IsToken(in.Method) {
		return fmt.Errorf("idemclient: Intent.Method %q is not a valid method", in.Method)
	}
	u, err := url.Parse(in.URL)
	if err != nil {
		return fmt.Errorf("idemclient: Intent.URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("idemclient: Intent.URL %q is not an absolute http or https URL", in.URL)
	}
	return nil
}
