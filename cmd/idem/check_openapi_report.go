package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/idemkit/idem/internal/check"
)

// inventorySummary is the inventory in one line.
func inventorySummary(o *openAPIOptions, audits []*apiAudit) string {
	var key, dup, ex int
	for _, a := range audits {
		if a.KeyHeader {
			key++
		}
		if a.Note == "retries may duplicate" {
			dup++
		}
		if a.Example {
			ex++
		}
	}
	return fmt.Sprintf("%d state-changing operations of %d: %d declare %s, %d POST or PATCH without it (retries may duplicate), %d with a request example",
		len(audits), o.doc.All, key, o.keyHeader, dup, ex)
}

// documentTitle is the report's first line: the command and the document.
func documentTitle(o *openAPIOptions) string {
	s := "idem check --openapi " + o.openapi
	if o.base != "" {
		s += " --base " + o.base
	}
	s += ": OpenAPI " + o.doc.Version
	if o.doc.Title != "" {
		s += ", " + o.doc.Title
	}
	return s
}

// writeInventory writes the list of state-changing operations.
func writeInventory(w io.Writer, o *openAPIOptions, audits []*apiAudit) error {
	fmt.Fprintf(w, "%s\n\n", documentTitle(o))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tPATH\tOPERATION\tKEY\t409\t422\tEXAMPLE\tNOTE")
	for _, a := range audits {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Method, a.Path, orDash(a.OperationID),
			a.keyColumn(), yesNo(a.Declares409), yesNo(a.Declares422), yesNo(a.Example), a.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nsummary: %s\n", inventorySummary(o, audits))
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeOpenAPIReport writes the audit: one line per operation (its key,
// each rule's verdict, its effects), the operations not audited and why,
// every verdict but PASS with its reason, and the totals.
func writeOpenAPIReport(w io.Writer, o *openAPIOptions, audits []*apiAudit, reports []*check.Report) error {
	fmt.Fprintf(w, "%s\n\n", documentTitle(o))
	var legend []string
	for _, r := range check.Rules() {
		legend = append(legend, fmt.Sprintf("%d %s", r.Rule, r.Name))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "OPERATION\tKEY"
	for _, r := range check.Rules() {
		head += fmt.Sprintf("\t%d", r.Rule)
	}
	fmt.Fprintln(tw, head+"\tEFFECTS")
	for _, a := range audits {
		if a.Report == nil {
			continue
		}
		line := a.name() + "\t" + a.keyColumn()
		for _, r := range a.Report.Results {
			line += "\t" + string(r.Status)
		}
		how := "counted"
		if !a.Report.Counted {
			how = "inferred"
		}
		fmt.Fprintf(tw, "%s\t%d %s\n", line, a.Report.EffectsCaused, how)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "rules: %s\n", strings.Join(legend, ", "))
	var notAudited []*apiAudit
	for _, a := range audits {
		if a.Report == nil {
			notAudited = append(notAudited, a)
		}
	}
	if len(notAudited) > 0 {
		fmt.Fprintln(w, "\nnot audited:")
		for _, a := range notAudited {
			fmt.Fprintf(w, "  %s: %s\n", a.name(), a.NotAudited)
		}
	}
	first := true
	for _, a := range audits {
		if a.Report == nil {
			continue
		}
		for _, r := range a.Report.Results {
			if r.Status == check.Pass || (a.Report.Error != "" && r.Status == check.Skip) {
				continue
			}
			if first {
				fmt.Fprintln(w, "\nfindings:")
				first = false
			}
			fmt.Fprintf(w, "  %s: %d %s %s: %s\n", a.name(), r.Rule, r.Name, r.Status, r.Reason)
		}
		if a.Report.Error != "" {
			if first {
				fmt.Fprintln(w, "\nfindings:")
				first = false
			}
			fmt.Fprintf(w, "  %s: stopped: %s\n", a.name(), a.Report.Error)
		}
	}
	t := openAPITotals(reports)
	fmt.Fprintf(w, "\nsummary: %s\n", inventorySummary(o, audits))
	fmt.Fprintf(w, "total: %d audited, %d not audited: %d PASS, %d FAIL, %d WARN, %d SKIP; effects caused: %d\n",
		len(reports), len(audits)-len(reports), t.Pass, t.Fail, t.Warn, t.Skip, t.EffectsCaused)
	return nil
}

// openAPIJSON is the --json output of --openapi.
type openAPIJSON struct {
	*apiDocument
	Operations []*apiAudit `json:"operations"`
	KeyHeader  string      `json:"key_header"`
	Base       string      `json:"base,omitempty"`
	// Audited counts the operations audited (with --base).
	Audited int `json:"audited"`
	openAPITotalsJSON
}

type openAPITotalsJSON struct {
	Pass          int   `json:"pass"`
	Fail          int   `json:"fail"`
	Warn          int   `json:"warn"`
	Skip          int   `json:"skip"`
	EffectsCaused int64 `json:"effects_caused"`
	// Failed is true when the exit status is 1.
	Failed bool `json:"failed"`
}

func openAPITotals(reports []*check.Report) openAPITotalsJSON {
	var t openAPITotalsJSON
	for _, r := range reports {
		t.Pass += r.Pass
		t.Fail += r.Fail
		t.Warn += r.Warn
		t.Skip += r.Skip
		t.EffectsCaused += r.EffectsCaused
		t.Failed = t.Failed || r.Failed()
	}
	return t
}

func writeOpenAPIJSON(w io.Writer, o *openAPIOptions, audits []*apiAudit, reports []*check.Report) error {
	out := openAPIJSON{apiDocument: o.doc, Operations: audits, KeyHeader: o.keyHeader, Base: o.base,
		Audited: len(reports), openAPITotalsJSON: openAPITotals(reports)}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
