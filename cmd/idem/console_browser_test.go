package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of the headless browser, or skips the test
// without one; under CI=true a missing browser is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH (CI=true: install Debian's chromium)")
	}
	t.Skip("no chromium on PATH")
	return ""
}

// consoleToken is the -admin-token of the browser test.
const consoleToken = "console-test-token-0123456789"

// TestConsoleResolvesAStuckPayoutInABrowser drives the console of idem
// serve -admin in headless Chromium: a payout whose provider only answers
// 502 is left pending; the operator logs in, sees it stuck with its steps,
// resolves it through the form with the provider's settled answer, and the
// audit log (idem keys --audit, read beside the running server) holds the
// change; a retry of the payout gets that answer. With
// IDEM_CONSOLE_SCREENSHOT set, the page is saved there (as
// docs/operations-console.png is).
func TestConsoleResolvesAStuckPayoutInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(down.Close)
	db := filepath.Join(t.TempDir(), "console.db")
	admin := freePort(t)
	s := startServe(t, "-db", db, "-provider", down.URL, "-lease", "1s", "-complete-interval", "1h", "-orphan-after", "1h",
		"-report-after", "1h", "-admin", admin, "-admin-token", consoleToken)
	if status, body := s.do(t, "PUT", "/accounts/alice", "", `{"balance":1000}`); status != 200 {
		t.Fatalf("PUT /accounts/alice: %d %s", status, body)
	}
	// Two payouts left pending: the operator resolves the first; the
	// page then still shows the second, stuck, beside the audit row.
	for _, key := range []string{"stuck-1", "stuck-2"} {
		if status, body := s.do(t, "POST", "/payouts", key, payoutBody()); status != 503 {
			t.Fatalf("POST /payouts: %d %s, want 503 (provider unknown)", status, body)
		}
	}
	waitFor(t, "the payouts' leases to end", func() bool {
		out, err := idemRun(t, "pending", "-db", db, "--stuck", "--json")
		return err == nil && strings.Count(out, `"stuck-`) == 2
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1400, 1100), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()

	const settled = `{"id":1,"account":"alice","amount":100,"state":"settled","provider_charge_id":"ch_checked_by_hand"}`
	const row = `tr.is-stuck[data-key="stuck-1"]`
	form := chromedp.CSS(row + ` form[action="/resolve"]`)
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+admin+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), consoleToken),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	if err != nil {
		t.Fatalf("browser: log in: %v\n%s", err, s.stderr)
	}
	stuckRow, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row)))
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.SetValue(form+` textarea[name=body]`, settled),
		chromedp.SendKeys(form+` input[name=actor]`, "carol"),
		chromedp.SendKeys(form+` input[name=reason]`, "provider dashboard shows the charge settled"),
		chromedp.Click(form+` button[name=resolve]`),
		chromedp.WaitVisible(chromedp.ID("msg")),
		chromedp.WaitVisible(chromedp.CSS(`tr.is-stuck[data-key="stuck-2"]`)),
	)
	if err != nil {
		t.Fatalf("browser: resolve: %v\n%s", err, s.stderr)
	}
	msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("msg")))
	if err != nil {
		t.Fatal(err)
	}
	auditTable, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("audit")))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stuckRow, "stuck-1") || !strings.Contains(stuckRow, "debit") {
		t.Errorf("the stuck row %q does not show the payout and its debit step", stuckRow)
	}
	if !strings.Contains(msg, "resolved") || !strings.Contains(auditTable, "carol") {
		t.Errorf("after the form: message %q, audit table %q", msg, auditTable)
	}
	name := os.Getenv("IDEM_CONSOLE_SCREENSHOT")
	if name == "" {
		name = filepath.Join(t.TempDir(), "console.png")
	}
	if err := os.WriteFile(name, shot, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := idemRun(t, "keys", "-db", db, "--audit", "--json")
	if err != nil {
		t.Fatal(err)
	}
	audit := jsonLines[auditJSON](t, out)
	if len(audit) != 1 || audit[0].Action != "resolve" || audit[0].Actor != "carol" || audit[0].Key != "stuck-1" ||
		audit[0].Reason != "provider dashboard shows the charge settled" || audit[0].Status != 201 ||
		audit[0].Before == nil || audit[0].Before.State != "pending" {
		t.Fatalf("audit log = %s, want carol's resolve of the pending payout", out)
	}
	if status, body := s.do(t, "POST", "/payouts", "stuck-1", payoutBody()); status != 201 || body != settled {
		t.Errorf("a retry of the payout got %d %s, want the resolved answer", status, body)
	}
	if strings.Contains(s.stderr.String(), consoleToken) {
		t.Error("the server logged the console's token")
	}
}
