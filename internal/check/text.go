package check

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText writes reports for a reader: per endpoint, a table of the
// rules with their verdicts and reasons, then each rule's evidence, then
// a summary line; and a last summary line over all endpoints when there
// are several.
func WriteText(w io.Writer, reports []*Report) error {
	var pass, fail, warn, skip int
	var caused int64
	for i, rep := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		title := rep.Method + " " + rep.URL
		if rep.Name != "" {
			title = rep.Name + ": " + title
		}
		fmt.Fprintf(w, "idem check %s\n", title)
		fmt.Fprintf(w, "effects: %s\n", rep.Effects)
		for _, x := range rep.Probe {
			fmt.Fprintf(w, "  %s\n", x)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tSTATUS\tREASON")
		for _, res := range rep.Results {
			fmt.Fprintf(tw, "%d %s\t%s\t%s\n", res.Rule, res.Name, res.Status, res.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		for _, res := range rep.Results {
			if len(res.Evidence) == 0 {
				continue
			}
			fmt.Fprintf(w, "%d %s (%s, %.0f ms):\n", res.Rule, res.Title, res.Status, res.Millis)
			for _, e := range res.Evidence {
				fmt.Fprintf(w, "    %s\n", e)
			}
		}
		fmt.Fprintf(w, "summary: %s\n", rep.Summary())
		pass, fail, warn, skip = pass+rep.Pass, fail+rep.Fail, warn+rep.Warn, skip+rep.Skip
		caused += rep.EffectsCaused
	}
	if len(reports) > 1 {
		stopped := 0
		for _, rep := range reports {
			if rep.Error != "" {
				stopped++
			}
		}
		s := fmt.Sprintf("\ntotal: %d endpoints: %d PASS, %d FAIL, %d WARN, %d SKIP; effects caused: %d", len(reports), pass, fail, warn, skip, caused)
		if stopped > 0 {
			s += fmt.Sprintf("; %d stopped early", stopped)
		}
		fmt.Fprintln(w, s)
	}
	return nil
}
