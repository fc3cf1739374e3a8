// Package checktest is a small payments API for the tests of idem check
// and idemtest: an idempotency layer written by hand that is correct, or
// that has one of the defects the audit exists to catch, as seen in
// hand-rolled implementations (see docs/CHECK.md). Expected gives the
// verdicts an audit must reach against each.
//
// The API: POST /payments with Authorization: Bearer <name> (the
// principal; 401 without it), Idempotency-Key, and a JSON body such as
// {"to":"bob","amount":10}, answered 201 with {"id":N,...} and Location
// /payments/N; GET /payments/count answers {"count":N}, the number of
// payments made, which is the effects counter.
//
// To make races happen on every run rather than by luck, an execution
// holds (between its check and its effect, or its effect and its record,
// depending on the defect) until Config.Burst requests with its key have
// arrived, or until no new one has arrived for Config.Idle: the audit's
// concurrent duplicates all meet it in flight, and a lone request is
// delayed by Idle only.
package checktest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/check"
)

// Defect is one way to get idempotency wrong, or Correct.
type Defect string

// The fixtures.
const (
	// Correct records the key, the effect and the answer together, refuses
	// a concurrent duplicate with 409 and Retry-After, replays a completed
	// key with Idempotent-Replayed: true, compares canonical JSON, and
	// scopes keys by principal.
	Correct Defect = "correct"
	// SeparateTx commits the effect, then records the key in a separate
	// transaction: duplicates that arrive in between (concurrent ones, or
	// retries after a crash in the gap) run again.
	SeparateTx Defect = "separate-transaction"
	// CheckThenInsert looks the key up, does the work, then inserts the
	// key with no unique constraint: concurrent duplicates all pass the
	// check and all run.
	CheckThenInsert Defect = "check-then-insert"
	// GlobalNamespace keys records by key alone, not by (principal, key):
	// principal B sending A's key gets A's recorded response.
	GlobalNamespace Defect = "global-namespace"
	// Conflict409 answers a retry of a completed key 409 "already
	// processed" instead of replaying the response.
	Conflict409 Defect = "conflict-409"
	// RawFingerprint compares request bodies byte for byte: the same JSON
	// with members in another order is refused with 422.
	RawFingerprint Defect = "raw-fingerprint"
	// UpsertAcrossPrincipals keys records by key alone and, when another
	// principal's record holds the key, runs the request again and
	// overwrites the record: each principal's request runs, but the first
	// principal's retry after the second's runs again too.
	UpsertAcrossPrincipals Defect = "upsert-across-principals"
	// RefuseRetries refuses every request whose key has a record with 422
	// "key already used", the identical retry too.
	RefuseRetries Defect = "refuse-retries"
	// ReplayDropsLocation replays the status and body (marked) but not the
	// Location header, and lets a duplicate that meets the execution in
	// flight wait for it and get the replay: one effect, a header lost.
	ReplayDropsLocation Defect = "replay-drops-location"
	// KeylessPerPrincipal takes a request without a key for the
	// principal's one key-less request: the first runs, and every later
	// one, whatever its body, gets the first one's recorded answer.
	KeylessPerPrincipal Defect = "keyless-per-principal"
	// AnyKey accepts any key string (256 characters, several header lines
	// joined, a list, non-ASCII) and keeps it safe: records, replays and
	// refuses as Correct does.
	AnyKey Defect = "any-key"
)

// Defects is every fixture, Correct first.
var Defects = []Defect{Correct, SeparateTx, CheckThenInsert, GlobalNamespace, Conflict409, RawFingerprint,
	UpsertAcrossPrincipals, RefuseRetries, ReplayDropsLocation, KeylessPerPrincipal, AnyKey}

// Expected returns the verdict of each rule for an audit of the fixture
// with a second principal, the key required, and either an effects
// counter or bodies that tell executions apart: the defect is caught by
// its rule, and the other rules pass, except those whose baseline the
// defect breaks, which say so (SKIP or WARN) rather than pass on no
// evidence.
func Expected(d Defect) map[int]check.Status {
	m := map[int]check.Status{}
	for n := 1; n <= 8; n++ {
		m[n] = check.Pass
	}
	switch d {
	case SeparateTx, CheckThenInsert:
		m[2] = check.Fail
	case GlobalNamespace, UpsertAcrossPrincipals:
		m[7] = check.Fail
	case Conflict409:
		// A retry is refused: rule 4's identical retry is no replay to
		// compare with, and rule 7's first principal is refused before
		// the second principal comes.
		m[1], m[4], m[7] = check.Fail, check.Skip, check.Warn
	case RefuseRetries:
		// Likewise, and rule 3's different body is refused exactly as the
		// identical retry is; the concurrent duplicates get 422.
		m[1], m[2], m[3], m[4], m[7] = check.Fail, check.Warn, check.Skip, check.Skip, check.Warn
	case RawFingerprint:
		m[4] = check.Warn
	case ReplayDropsLocation:
		m[1], m[2] = check.Warn, check.Warn
	case KeylessPerPrincipal:
		m[5], m[8] = check.Fail, check.Fail
	case AnyKey:
		m[6] = check.Warn
	}
	return m
}

// Config configures a Server.
type Config struct {
	Defect Defect
	// Burst is how many requests with one key an execution waits for
	// (the audit's concurrency). Defaults to 20.
	Burst int
	// Idle is how long an execution waits for one more request with its
	// key. Defaults to 500 ms.
	Idle time.Duration
	// ConstantBody answers every payment 201 with the same body, so that
	// answers do not tell executions apart.
	ConstantBody bool
	// KeyOptional runs a request without a key, unprotected, instead of
	// refusing it with 400.
	KeyOptional bool
}

// Server is the payments API. It is safe for concurrent use.
type Server struct {
	cfg Config

	mu       sync.Mutex
	payments int
	records  map[recordKey]*record
	arrivals map[recordKey]*arrival
}

type recordKey struct{ scope, key string }

type record struct {
	principal   string
	fingerprint string
	done        bool
	ready       chan struct{} // closed when done, on the default path
	answer      answer
}

type answer struct {
	status   int
	location string
	body     []byte
}

type arrival struct {
	n       int
	last    time.Time
	changed chan struct{} // closed at the next arrival
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Defect == "" {
		cfg.Defect = Correct
	}
	if cfg.Burst == 0 {
		cfg.Burst = check.DefaultConcurrency
	}
	if cfg.Idle == 0 {
		cfg.Idle = 500 * time.Millisecond
	}
	return &Server{cfg: cfg, records: map[recordKey]*record{}, arrivals: map[recordKey]*arrival{}}
}

// Effects returns the number of payments made.
func (s *Server) Effects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.payments
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/payments/count":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"count":%d}`, s.Effects())
	case r.Method == http.MethodPost && r.URL.Path == "/payments":
		s.create(w, r)
	default:
		http.NotFound(w, r)
	}
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"status":%d,"detail":%q}`, status, detail)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	principal, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || principal == "" {
		problem(w, http.StatusUnauthorized, "use Authorization: Bearer <name>")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		problem(w, http.StatusBadRequest, "unreadable body")
		return
	}
	canonical, err := idem.CanonicalJSON(body)
	var in struct {
		To     string `json:"to"`
		Amount int64  `json:"amount"`
	}
	if err != nil || json.Unmarshal(body, &in) != nil {
		problem(w, http.StatusBadRequest, "the body must be a JSON payment")
		return
	}
	values := r.Header.Values("Idempotency-Key")
	switch {
	case len(values) == 0 && s.cfg.Defect == KeylessPerPrincipal:
		s.keyless(w, principal, in.To, in.Amount)
		return
	case len(values) == 0 && s.cfg.KeyOptional:
		s.mu.Lock()
		a := s.pay(in.To, in.Amount)
		s.mu.Unlock()
		write(w, a, false)
		return
	case len(values) == 0:
		problem(w, http.StatusBadRequest, "Idempotency-Key is required")
		return
	case len(values) > 1 && s.cfg.Defect != AnyKey:
		problem(w, http.StatusBadRequest, "one Idempotency-Key, please")
		return
	}
	key := strings.Join(values, ", ")
	if s.cfg.Defect != AnyKey {
		if key, err = idem.ParseKey(values[0]); err != nil {
			problem(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	fp := sha256.Sum256(canonical)
	if s.cfg.Defect == RawFingerprint {
		fp = sha256.Sum256(body)
	}
	rk := recordKey{principal, key}
	if s.cfg.Defect == GlobalNamespace || s.cfg.Defect == UpsertAcrossPrincipals {
		rk.scope = ""
	}
	s.mu.Lock()
	s.arrive(rk) // with the check, so that no holder finishes in between
	rec := s.records[rk]
	if rec != nil && !rec.done && rec.ready != nil && s.cfg.Defect == ReplayDropsLocation {
		// This server lets a duplicate wait for the execution in flight.
		s.mu.Unlock()
		<-rec.ready
		s.mu.Lock()
	}
	if rec != nil && !(s.cfg.Defect == UpsertAcrossPrincipals && rec.principal != principal) {
		s.existing(w, rec, string(fp[:]))
		s.mu.Unlock()
		return
	}
	switch s.cfg.Defect {
	case SeparateTx:
		// The effect's transaction commits; the key's comes later.
		a := s.pay(in.To, in.Amount)
		s.mu.Unlock()
		s.hold(rk)
		s.mu.Lock()
		s.records[rk] = &record{fingerprint: string(fp[:]), done: true, answer: a}
		s.mu.Unlock()
		write(w, a, false)
	case CheckThenInsert:
		// The check found nothing; the work runs; the insert cannot fail,
		// as nothing makes the key unique.
		s.mu.Unlock()
		s.hold(rk)
		s.mu.Lock()
		a := s.pay(in.To, in.Amount)
		s.records[rk] = &record{fingerprint: string(fp[:]), done: true, answer: a}
		s.mu.Unlock()
		write(w, a, false)
	default:
		// The key is taken (a row lock, say) before the work, and the
		// effect and the answer are recorded with it.
		rec := &record{principal: principal, fingerprint: string(fp[:]), ready: make(chan struct{})}
		s.records[rk] = rec
		s.mu.Unlock()
		s.hold(rk)
		s.mu.Lock()
		a := s.pay(in.To, in.Amount)
		rec.done, rec.answer = true, a
		close(rec.ready)
		s.mu.Unlock()
		write(w, a, false)
	}
}

// existing answers a request whose key has a record; s.mu is held.
func (s *Server) existing(w http.ResponseWriter, rec *record, fp string) {
	switch {
	case s.cfg.Defect == RefuseRetries:
		problem(w, http.StatusUnprocessableEntity, "this key was already used")
	case rec.fingerprint != fp:
		problem(w, http.StatusUnprocessableEntity, "this key was used with another request")
	case !rec.done:
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusConflict, "a request with this key is in progress")
	case s.cfg.Defect == Conflict409:
		problem(w, http.StatusConflict, "already processed")
	case s.cfg.Defect == ReplayDropsLocation:
		a := rec.answer
		a.location = ""
		write(w, a, true)
	default:
		write(w, rec.answer, true)
	}
}

// keyless answers a request without a key for KeylessPerPrincipal: the
// principal's first one runs, every later one gets its answer.
func (s *Server) keyless(w http.ResponseWriter, principal, to string, amount int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rk := recordKey{scope: principal} // a parsed key is never empty
	if rec := s.records[rk]; rec != nil {
		write(w, rec.answer, true)
		return
	}
	a := s.pay(to, amount)
	s.records[rk] = &record{principal: principal, done: true, answer: a}
	write(w, a, false)
}

// pay makes one payment; s.mu is held.
func (s *Server) pay(to string, amount int64) answer {
	s.payments++
	id := s.payments
	if s.cfg.ConstantBody {
		return answer{status: http.StatusCreated, body: []byte(`{"ok":true}`)}
	}
	b, _ := json.Marshal(map[string]any{"id": id, "to": to, "amount": amount})
	return answer{status: http.StatusCreated, location: "/payments/" + strconv.Itoa(id), body: b}
}

func write(w http.ResponseWriter, a answer, replayed bool) {
	w.Header().Set("Content-Type", "application/json")
	if a.location != "" {
		w.Header().Set("Location", a.location)
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// arrive counts a request with key rk; s.mu is held.
func (s *Server) arrive(rk recordKey) {
	a := s.arrivals[rk]
	if a == nil {
		a = &arrival{changed: make(chan struct{})}
		s.arrivals[rk] = a
	}
	a.n++
	a.last = time.Now()
	close(a.changed)
	a.changed = make(chan struct{})
}

// hold waits until Burst requests with key rk have arrived, or none has
// for Idle.
func (s *Server) hold(rk recordKey) {
	for {
		s.mu.Lock()
		a := s.arrivals[rk]
		n, wait, changed := a.n, time.Until(a.last.Add(s.cfg.Idle)), a.changed
		s.mu.Unlock()
		if n >= s.cfg.Burst || wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}
