// Package console is the operators' page of idem serve -admin: one
// server-rendered page (html/template, no external assets) with the counts
// of the records by state, the work in flight, the pending and stuck
// leased records with their steps, the recent outcomes and the audit log,
// and the forms that forget or resolve a record with a reason.
//
// Every request needs the token: in an Authorization: Bearer header, or in
// the HttpOnly, SameSite=Strict session cookie that the login form sets.
// Every state-changing request needs the page's CSRF token too. Tokens are
// compared in constant time and never logged. What the page shows and does
// comes from Ops, which idem serve implements on its store.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Ops is what the console reads and changes.
type Ops interface {
	// Summary returns what the page shows.
	Summary(ctx context.Context) (*Summary, error)
	// Forget forgets the record of (scope, key) whose token is token.
	Forget(ctx context.Context, a Action) error
	// Resolve resolves it (Action.Status and Body, or Action.Abandon).
	Resolve(ctx context.Context, a Action) error
}

// Action is one form sent.
type Action struct {
	Scope, Key    string
	Token         int64
	Force         bool
	Abandon       bool
	Status        int
	Body          []byte
	Actor, Reason string
}

// Summary is what the page shows.
type Summary struct {
	// Counts are the records by state: completed, expired, in flight
	// (pending under a live lease) and stuck.
	Completed, Expired, InFlight, Stuck int
	// Counted is how many records were counted, and Capped whether the
	// count stopped at its bound before the last one.
	Counted int
	Capped  bool
	// Pending are the pending records, stuck ones first.
	Pending []Record
	// Recent are the most recently created completed records.
	Recent []Record
	// Audit are the newest audit entries.
	Audit []AuditEntry
	Now   time.Time
}

// Record is one record as the page shows it.
type Record struct {
	Scope, Key, State, Kind string
	Token                   int64
	Status, Attempts        int
	Created, Until          time.Time
	LastError               string
	Stuck                   bool
	Steps                   []Step
}

// Step is a recovery point as the page shows it.
type Step struct{ Name, Output string }

// AuditEntry is an audit entry as the page shows it.
type AuditEntry struct {
	ID                                     int64
	At                                     time.Time
	Actor, Action, Scope, Key, Reason, Was string
	Status                                 int
}

// Config configures a Handler.
type Config struct {
	// Token is the secret every request must carry; it must not be empty.
	Token string
	Ops   Ops
	// Logger receives a line per change and per refused request (never
	// a token); nil discards them.
	Logger *slog.Logger
	// Secure marks the session cookie Secure (the console is served over
	// TLS).
	Secure bool
}

// cookieName is the session cookie's.
const cookieName = "idem_admin"

// Handler serves the console.
type Handler struct {
	cfg     Config
	session string // the cookie's value: derived from the token, never the token
	csrf    string // the forms' CSRF token
	mux     *http.ServeMux
}

// New returns the console's handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Token == "" {
		return nil, errors.New("console: the token must not be empty")
	}
	if cfg.Ops == nil {
		return nil, errors.New("console: Ops is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, session: derive(cfg.Token, "session"), csrf: derive(cfg.Token, "csrf")}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET /{$}", h.page)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("POST /logout", h.logout)
	h.mux.HandleFunc("POST /forget", h.forget)
	h.mux.HandleFunc("POST /resolve", h.resolve)
	return h, nil
}

// derive is a value of the token for one purpose, which reveals nothing of
// the token.
func derive(token, purpose string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("idem-console/" + purpose))
	return hex.EncodeToString(m.Sum(nil))
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authorized reports whether r carries the token (header) or the session
// cookie.
func (h *Handler) authorized(r *http.Request) bool {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return equal(v, h.cfg.Token)
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return equal(c.Value, h.session)
	}
	return false
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	if r.Method == http.MethodPost && r.URL.Path == "/login" {
		h.mux.ServeHTTP(w, r)
		return
	}
	if !h.authorized(r) {
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_ = loginPage.Execute(w, map[string]any{"Failed": r.URL.Query().Has("failed")})
			return
		}
		h.cfg.Logger.Warn("idem console: request refused: no valid token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		http.Error(w, "a token is required (Authorization: Bearer, or log in at /)", http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost && !equal(r.PostFormValue("csrf"), h.csrf) {
		h.cfg.Logger.Warn("idem console: request refused: no valid CSRF token", "path", r.URL.Path, "remote", r.RemoteAddr)
		http.Error(w, "the form's CSRF token is missing or wrong: reload the page", http.StatusForbidden)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if !equal(r.PostFormValue("token"), h.cfg.Token) {
		h.cfg.Logger.Warn("idem console: login refused", "remote", r.RemoteAddr)
		http.Redirect(w, r, "/?failed", http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: h.session, Path: "/", HttpOnly: true, Secure: h.cfg.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: 12 * 3600})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, Secure: h.cfg.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	s, err := h.cfg.Ops.Summary(r.Context())
	if err != nil {
		h.cfg.Logger.Error("idem console: summary", "err", err)
		http.Error(w, "the store could not be read: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := mainPage.Execute(w, map[string]any{"S": s, "CSRF": h.csrf, "Msg": q.Get("msg"), "Err": q.Get("err")}); err != nil {
		h.cfg.Logger.Error("idem console: render", "err", err)
	}
}

// action reads a form's common fields; it returns a message for the
// operator if one is missing.
func action(r *http.Request) (Action, string) {
	a := Action{Scope: r.PostFormValue("scope"), Key: r.PostFormValue("key"),
		Actor: strings.TrimSpace(r.PostFormValue("actor")), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	if t := r.PostFormValue("token"); t != "" {
		var err error
		if a.Token, err = strconv.ParseInt(t, 10, 64); err != nil {
			return a, "bad record token"
		}
	}
	switch {
	case a.Scope == "" || a.Key == "":
		return a, "scope and key are required"
	case a.Actor == "":
		return a, "say who you are (actor), for the audit log"
	case a.Reason == "":
		return a, "a reason is required, for the audit log"
	}
	return a, ""
}

func (h *Handler) done(w http.ResponseWriter, r *http.Request, msg string, err error) {
	v := url.Values{}
	if err != nil {
		v.Set("err", msg+": "+err.Error())
	} else {
		v.Set("msg", msg)
	}
	http.Redirect(w, r, "/?"+v.Encode(), http.StatusSeeOther)
}

func (h *Handler) forget(w http.ResponseWriter, r *http.Request) {
	a, bad := action(r)
	if bad != "" {
		h.done(w, r, "forget", errors.New(bad))
		return
	}
	a.Force = r.PostFormValue("force") != ""
	err := h.cfg.Ops.Forget(r.Context(), a)
	h.cfg.Logger.Info("idem console: forget", "scope", a.Scope, "key", a.Key, "actor", a.Actor, "err", err)
	h.done(w, r, "forgot "+a.Scope+" "+a.Key, err)
}

func (h *Handler) resolve(w http.ResponseWriter, r *http.Request) {
	a, bad := action(r)
	if bad != "" {
		h.done(w, r, "resolve", errors.New(bad))
		return
	}
	a.Abandon = r.PostFormValue("abandon") != ""
	if !a.Abandon {
		st, err := strconv.Atoi(r.PostFormValue("status"))
		if err != nil || st < 200 || st > 599 {
			h.done(w, r, "resolve", errors.New("the answer's status must be an HTTP status from 200 to 599"))
			return
		}
		a.Status, a.Body = st, []byte(r.PostFormValue("body"))
	}
	err := h.cfg.Ops.Resolve(r.Context(), a)
	h.cfg.Logger.Info("idem console: resolve", "scope", a.Scope, "key", a.Key, "actor", a.Actor, "abandon", a.Abandon, "err", err)
	verb := "resolved "
	if a.Abandon {
		verb = "abandoned "
	}
	h.done(w, r, verb+a.Scope+" "+a.Key, err)
}
