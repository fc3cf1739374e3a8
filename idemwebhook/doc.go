// Package idemwebhook receives webhooks exactly once, with the standard
// library only.
//
// A provider delivers each event at least once and retries until it gets a
// 2xx. New returns middleware that, for each delivery, bounds its body,
// verifies its signature (before anything is recorded or run), takes the
// provider's delivery id, and runs the handler through an idem.Guard with
// that id as the key, by package idemhttp: the handler's effect and the
// delivery's record commit in one transaction, so a redelivery gets the
// recorded answer and runs nothing.
//
//	v, _ := idemwebhook.NewStandard(os.Getenv("WEBHOOK_SECRET"))
//	receive := idemwebhook.New(guard, v, &idemwebhook.Config{Endpoint: "deposits"})
//	mux.Handle("POST /webhooks/deposits", receive(deposits))
//
// Verifiers: NewStandard (Standard Webhooks, as sent by Svix), NewStripe,
// NewGitHub, NewShopify, and NewHMAC for a scheme of one's own. Each
// accepts several secrets at once, for rotation. docs/WEBHOOKS.md gives
// the order of the checks and why, and what a receiver must never do.
package idemwebhook
