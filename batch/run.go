package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// Item is one item of a batch.
type Item[T any] struct {
	// ID is the item's own id, unique in its batch and the same on every
	// run (a row id, a line's business id). Not empty.
	ID string
	// Body is the item's content as it must be on every run: a re-run
	// whose Body differs under the same ID is refused as a mismatch. It is
	// fingerprinted, not stored.
	Body []byte
	// Value is what the work needs, typically Body decoded.
	Value T
}

// Apply is the work of one item. ctx carries the transaction of the guard's
// store in which the item's record will be written (sqlitestore.TxFrom,
// pgstore.TxFrom): the work writes its effect through it, so that the
// effect and the record commit together.
//
// It returns the item's result, recorded and replayed to re-runs (a Status
// of 400 or more makes the item Refused, with the work's writes
// committed); an error made with Refuse to refuse the item with nothing
// of its writes committed; or another error, which rolls everything back,
// records nothing and reports the item Failed. A panic is not recovered.
type Apply[T any] func(ctx context.Context, item Item[T]) (idem.Result, error)

// errRefusal rolls back the transaction of a work that refused its item.
var errRefusal = errors.New("batch: the work refused the item")

// Run runs apply for each item of items that has not taken effect yet
// under its key (Key(cfg.BatchID, item.ID) in cfg.Scope), through g, and
// reports what became of each. See the package documentation for the
// outcomes.
//
// The error is nil when the batch ran to its end, whatever the items'
// outcomes (see Report.OK). It is the context's error when ctx ended
// first: the items that had not started are then reported Failed with it,
// and a re-run runs them. Any other error (an invalid cfg, an item without
// an ID) is returned before anything runs, with a nil Report.
func Run[T any](ctx context.Context, g *idem.Guard, cfg *Config, items []Item[T], apply Apply[T]) (*Report, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, errors.New("batch: Run: guard is nil")
	}
	if apply == nil {
		return nil, errors.New("batch: Run: apply is nil")
	}
	for i, it := range items {
		if it.ID == "" {
			return nil, fmt.Errorf("batch: item %d has no ID", i)
		}
	}
	r := &runner[T]{g: g, cfg: c, apply: apply}
	rep := &Report{BatchID: c.BatchID, Items: make([]ItemReport, len(items))}
	var (
		next atomic.Int64
		mu   sync.Mutex // guards rep.Counts, done, and the calls of Progress
		done int
		wg   sync.WaitGroup
	)
	for range min(c.Concurrency, max(len(items), 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(items) || ctx.Err() != nil {
					return
				}
				ir := r.item(ctx, items[i])
				rep.Items[i] = ir
				mu.Lock()
				rep.add(ir.Outcome)
				done++
				if c.Progress != nil {
					c.Progress(Progress{Counts: rep.Counts, Done: done, Total: len(items)})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		for i, it := range items {
			if rep.Items[i].ID == "" { // not run: r.item reports every item with its (non-empty) ID
				rep.Items[i] = ItemReport{ID: it.ID, Outcome: Failed, Reason: "not run: " + err.Error(), Err: err}
				rep.add(Failed)
			}
		}
		return rep, err
	}
	return rep, nil
}

type runner[T any] struct {
	g     *idem.Guard
	cfg   Config
	apply Apply[T]
}

// item runs one item and reports its outcome.
func (r *runner[T]) item(ctx context.Context, it Item[T]) ItemReport {
	req := idem.Request{
		Scope:       r.cfg.Scope,
		Key:         Key(r.cfg.BatchID, it.ID),
		Fingerprint: fingerprint(it.Body),
		TTL:         r.cfg.TTL,
	}
	var refused *refusal
	res, replayed, err := r.do(ctx, req, func(ctx context.Context) (idem.Result, error) {
		refused = nil
		res, err := r.apply(ctx, it)
		if err != nil {
			if errors.As(err, &refused) {
				return idem.Result{}, errRefusal
			}
			return idem.Result{}, err
		}
		return res, nil
	})
	switch {
	case err == nil:
		return done(it.ID, res, replayed)
	case refused != nil && errors.Is(err, errRefusal):
		return r.refuse(ctx, req, it.ID, refused)
	}
	return failure(it.ID, err)
}

// refuse records the refusal of an item in a transaction of its own: the
// work's has been rolled back with whatever it wrote.
func (r *runner[T]) refuse(ctx context.Context, req idem.Request, id string, refused *refusal) ItemReport {
	reason := cut(refused.err.Error())
	res, replayed, err := r.do(ctx, req, func(context.Context) (idem.Result, error) {
		return idem.Result{Status: StatusRefused, Body: []byte(reason)}, nil
	})
	if err != nil {
		return failure(id, err)
	}
	// replayed: another run settled the item between the two
	// transactions; its outcome stands.
	return done(id, res, replayed)
}

// do calls the guard, trying again while the key is in flight, for up to
// Config.InFlightWait.
func (r *runner[T]) do(ctx context.Context, req idem.Request, work idem.Work) (idem.Result, bool, error) {
	deadline := time.Now().Add(r.cfg.InFlightWait)
	delay := 10 * time.Millisecond
	for {
		res, replayed, err := r.g.Do(ctx, req, work)
		left := time.Until(deadline)
		if !errors.Is(err, idem.ErrInFlight) || left <= 0 {
			return res, replayed, err
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return res, replayed, err
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// done reports an item the guard answered with a result.
func done(id string, res idem.Result, replayed bool) ItemReport {
	switch {
	case res.Status >= 400:
		return ItemReport{ID: id, Outcome: Refused, Replayed: replayed, Result: res, Reason: resultReason(res)}
	case replayed:
		return ItemReport{ID: id, Outcome: Replayed, Replayed: true, Result: res}
	}
	return ItemReport{ID: id, Outcome: Applied, Result: res}
}

// failure reports an item the guard answered with an error.
func failure(id string, err error) ItemReport {
	if errors.Is(err, idem.ErrMismatch) {
		return ItemReport{ID: id, Outcome: Refused, Err: idem.ErrMismatch,
			Reason: fmt.Sprintf("mismatch: item %q was run before in this batch with other content; give a changed item a new id", id)}
	}
	return ItemReport{ID: id, Outcome: Failed, Reason: err.Error(), Err: err}
}
