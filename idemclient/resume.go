package idemclient

import (
	"context"
	"errors"
)

// ResumeResult is what Resume did with one pending intent: the values Do
// returned for it.
type ResumeResult struct {
	Intent   *Intent
	Response *Response
	Err      error
}

// Resume carries out every pending intent of Config.Journal with Do, oldest
// first and one at a time, each with the key it was saved with: an intent
// the server already applied is answered from its record (Replayed), one it
// never received runs now. It returns one ResumeResult per intent it tried. It
// stops early, returning ctx's error, when ctx is done; an intent whose Do
// fails stays pending and does not stop the others. When the journal could
// not read some of its entries, Resume still carries out the intents it
// could read and returns their results with the journal's error (matching
// ErrUnreadableIntent).
//
// Call it when the application starts, and whenever it wants to retry what
// an earlier Do left pending.
func (c *Client) Resume(ctx context.Context) ([]ResumeResult, error) {
	if c.cfg.Journal == nil {
		return nil, errors.New("idemclient: Resume: Config.Journal is not set")
	}
	pending, perr := c.cfg.Journal.Pending(ctx)
	if perr != nil && len(pending) == 0 {
		return nil, perr
	}
	out := make([]ResumeResult, 0, len(pending))
	for _, in := range pending {
		if err := ctx.Err(); err != nil {
			if perr != nil {
				err = errors.Join(err, perr)
			}
			return out, err
		}
		res, err := c.Do(ctx, in)
		out = append(out, ResumeResult{Intent: in, Response: res, Err: err})
	}
	return out, perr
}
