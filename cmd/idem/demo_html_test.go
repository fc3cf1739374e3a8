package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// htmlModeFacts is what the report's page says of one mode, read back
// from its HTML.
type htmlModeFacts struct {
	table          map[string]string // data-field → cell text
	facts          map[string]string // data-fact → text
	marks          int               // attempt marks in the timeline
	kills          int               // kill lines
	applied        []int             // data-applied of each intent row
	timelineExists bool
}

// TestDemoHTMLReport runs idem demo --html as a user would, beside --json,
// and reads the page back: it exists, needs nothing from outside, and its
// table and timelines hold the numbers of that run (the table cell for
// cell, the intents' transfers summing to the applied and duplicated
// counts, a mark per attempt the network saw, a line per kill).
func TestDemoHTMLReport(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "report.html")
	var out, errOut bytes.Buffer
	cmd := exec.Command(binary, "demo", "-intents", "40", "-kills", "2", "-seed", "5", "-json", "-html", path)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("idem demo: %v\n%s", err, errOut.String())
	}
	var reports []struct {
		Mode       string           `json:"mode"`
		Intents    int              `json:"intents"`
		Applied    int              `json:"transfers_applied"`
		Duplicated int              `json:"duplicated"`
		Lost       int              `json:"lost"`
		Conserved  bool             `json:"money_conserved"`
		Correct    bool             `json:"balances_as_intended"`
		Attempts   int64            `json:"attempts"`
		Kills      int              `json:"kills"`
		Faults     map[string]int64 `json:"faults"`
	}
	if err := json.Unmarshal(out.Bytes(), &reports); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ext := regexp.MustCompile(`(?i)<script|<link|<img|<iframe|\bsrc=|\bhref=|url\(|@import`).Find(page); ext != nil {
		t.Fatalf("the page loads something from outside: %q", ext)
	}
	modes := parseReport(t, page)
	if len(modes) != len(reports) || len(reports) != 3 {
		t.Fatalf("page has %d modes, the run %d", len(modes), len(reports))
	}
	yes := map[bool]string{true: "yes", false: "NO"}
	for _, r := range reports {
		m, ok := modes[r.Mode]
		if !ok || !m.timelineExists {
			t.Fatalf("no timeline for %s", r.Mode)
		}
		want := map[string]string{
			"mode": r.Mode, "intents": strconv.Itoa(r.Intents), "attempts": strconv.FormatInt(r.Attempts, 10),
			"transfers_applied": strconv.Itoa(r.Applied), "duplicated": strconv.Itoa(r.Duplicated), "lost": strconv.Itoa(r.Lost),
			"money_conserved": yes[r.Conserved], "balances_as_intended": yes[r.Correct],
		}
		for k, v := range want {
			if got := m.table[k]; got != v {
				t.Errorf("%s: table %s = %q, the run says %q", r.Mode, k, got, v)
			}
		}
		if len(m.applied) != r.Intents {
			t.Fatalf("%s: %d intent rows, want %d", r.Mode, len(m.applied), r.Intents)
		}
		sum, dup, lost, twice := 0, 0, 0, 0
		for _, n := range m.applied {
			sum += n
			if n > 1 {
				dup += n - 1
				twice++
			}
			if n == 0 {
				lost++
			}
		}
		if sum != r.Applied || dup != r.Duplicated || lost != r.Lost {
			t.Errorf("%s: rows hold %d applied, %d duplicated, %d lost; the run %d, %d, %d", r.Mode, sum, dup, lost, r.Applied, r.Duplicated, r.Lost)
		}
		if m.facts["twice"] != strconv.Itoa(twice) {
			t.Errorf("%s: says %s intents applied more than once, rows show %d", r.Mode, m.facts["twice"], twice)
		}
		if m.kills != r.Kills || m.facts["kills"] != strconv.Itoa(r.Kills) {
			t.Errorf("%s: %d kill lines (fact %s), the run killed %d times", r.Mode, m.kills, m.facts["kills"], r.Kills)
		}
		var seen int64
		for _, n := range r.Faults {
			seen += n
		}
		if m.facts["seen"] != strconv.FormatInt(seen, 10) || int64(m.marks) != seen {
			t.Errorf("%s: %d attempt marks (fact %s); the network counted %d", r.Mode, m.marks, m.facts["seen"], seen)
		}
		if r.Mode == "idem" && (twice != 0 || r.Duplicated != 0) {
			t.Errorf("idem: %d intents applied twice", twice)
		}
		if r.Mode != "idem" && twice == 0 {
			t.Errorf("%s: no intent applied twice: the picture cannot show the failure", r.Mode)
		}
	}
}

// parseReport reads the modes' tables rows and timelines from the page.
func parseReport(t *testing.T, page []byte) map[string]*htmlModeFacts {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]*htmlModeFacts{}
	get := func(mode string) *htmlModeFacts {
		if modes[mode] == nil {
			modes[mode] = &htmlModeFacts{table: map[string]string{}, facts: map[string]string{}}
		}
		return modes[mode]
	}
	attr := func(n *html.Node, name string) (string, bool) {
		for _, a := range n.Attr {
			if a.Key == name {
				return a.Val, true
			}
		}
		return "", false
	}
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(text(c))
		}
		return b.String()
	}
	var walk func(n *html.Node, mode string, inTable bool)
	walk = func(n *html.Node, mode string, inTable bool) {
		if n.Type == html.ElementNode {
			if v, ok := attr(n, "data-mode"); ok {
				mode = v
				inTable = n.Data == "tr"
				if n.Data == "section" {
					get(mode)
				}
			}
			m := get(mode)
			if v, ok := attr(n, "data-field"); ok && inTable {
				m.table[v] = strings.TrimSpace(text(n))
			}
			if v, ok := attr(n, "data-fact"); ok {
				m.facts[v] = strings.TrimSpace(text(n))
			}
			if v, ok := attr(n, "data-applied"); ok {
				k, _ := strconv.Atoi(v)
				m.applied = append(m.applied, k)
			}
			if n.Data == "svg" {
				m.timelineExists = true
			}
			if c, _ := attr(n, "class"); n.Data == "rect" && strings.HasSuffix(c, " attempt") {
				m.marks++
			}
			if c, _ := attr(n, "class"); n.Data == "line" && c == "kill" {
				m.kills++
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, mode, inTable)
		}
	}
	walk(doc, "", false)
	delete(modes, "")
	return modes
}

// A page that cannot be written is refused before the run, not after it.
func TestDemoHTMLUnwritableIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(),
		[]string{"demo", "--html", filepath.Join(t.TempDir(), "missing", "report.html")})
	// A usage error comes from the checks before the run (a page that
	// failed to write after it would be a plain error).
	if !errors.As(err, new(usageError)) {
		t.Fatalf("err = %v, want a usage error", err)
	}
}
