package batch

import "github.com/idemkit/idem"

// Outcome is how an item ended. See the package documentation.
type Outcome string

// Outcomes.
const (
	Applied  Outcome = "applied"
	Replayed Outcome = "replayed"
	Refused  Outcome = "refused"
	Failed   Outcome = "failed"
)

// ItemReport is what became of one item.
type ItemReport struct {
	// ID is the item's id.
	ID string
	// Outcome is how the item ended.
	Outcome Outcome
	// Replayed reports that the outcome was recorded by an earlier run
	// (or an earlier item with the same id): always for Replayed, and for
	// a Refused item whose refusal was recorded before.
	Replayed bool
	// Result is the item's result: the work's, or the recorded one. Zero
	// for a mismatch and for Failed.
	Result idem.Result
	// Reason says why an item was Refused or Failed, in words.
	Reason string
	// Err is the error of a Failed item (it may match idem.ErrUnavailable,
	// idem.ErrInFlight, the context's error, or be the work's own), and
	// idem.ErrMismatch for a mismatch. Nil otherwise.
	Err error
}

// Counts counts items by outcome.
type Counts struct {
	Applied, Replayed, Refused, Failed int
}

// Progress is what Config.Progress receives after each item.
type Progress struct {
	Counts
	// Done is how many items have ended, Total how many the batch has.
	Done, Total int
}

// Report is the result of Run: one ItemReport per item, in the order of
// the items, and the counts.
type Report struct {
	BatchID string
	Items   []ItemReport
	Counts
}

// OK reports whether every item was Applied or Replayed.
func (r *Report) OK() bool { return r.Refused == 0 && r.Failed == 0 }

func (c *Counts) add(o Outcome) {
	switch o {
	case Applied:
		c.Applied++
	case Replayed:
		c.Replayed++
	case Refused:
		c.Refused++
	case Failed:
		c.Failed++
	}
}
