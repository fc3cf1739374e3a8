package idemhttp

import (
	"log/slog"
	"time"

	"github.com/idemkit/idem"
)

// done logs the outcome and tells the observer.
func (c *call) done(o idem.Outcome, status int, err error) {
	d := time.Since(c.start)
	ctx := c.r.Context()
	level := o.Level()
	if logger := c.m.logger(); logger.Enabled(ctx, level) {
		attrs := []slog.Attr{
			slog.String("outcome", string(o)),
			slog.String("method", c.r.Method),
			slog.String("route", c.route),
		}
		if c.keyHash != "" {
			attrs = append(attrs, slog.String("key_sha256", c.keyHash))
		}
		if status != 0 {
			attrs = append(attrs, slog.Int("status", status))
		}
		attrs = append(attrs, slog.Duration("duration", d))
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		attrs = callInfoAttrs(attrs, c.info)
		logger.LogAttrs(ctx, level, "idemhttp: "+string(o), attrs...)
	}
	if c.m.cfg.Observer != nil {
		c.m.cfg.Observer.Observe(ctx, idem.Event{Transport: idem.TransportHTTP, Outcome: o, Method: c.r.Method, Route: c.route, Status: status, Duration: d, KeyHash: c.keyHash,
			ReplayCache: c.info.ReplayCache, LocalInFlight: c.info.LocalInFlight})
	}
}

// logger is Config.Logger, or slog.Default() at the time of the call.
func (m *Middleware) logger() *slog.Logger {
	if m.cfg.Logger != nil {
		return m.cfg.Logger
	}
	return slog.Default()
}
