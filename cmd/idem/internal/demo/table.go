package demo

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the reports as one table.
func WriteTable(w io.Writer, reports []Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tintents\tattempts\ttransfers applied\tduplicated\tlost\tmoney conserved\tbalances as intended\t")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n",
			r.Mode, r.Intents, r.Attempts, r.Applied, r.Duplicated, r.Lost, yesNo(r.Conserved), yesNo(r.Correct))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}
