package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// E8: the guard commits under a deadline of its own (the caller's ctx
// without its cancellation, plus 30 s). A COMMIT that hangs on the disk
// (a stuck fsync, here a hook) must not hold the caller, the key and the
// writer slot past that deadline: Commit fails with ErrUnavailable at the
// deadline and frees the key and the slot. The COMMIT goes on in the
// background; whether it then commits or fails, the key ends up replayed
// or free, never stuck.
func TestCommitEndsAtTheCallersDeadline(t *testing.T) {
	t.Parallel()
	hungErr := errors.New("fsync failed")
	for _, tt := range []struct {
		name       string
		outcome    error // what the hung COMMIT does once it wakes up
		wantRecord bool
	}{
		{"CommitsLate", nil, true},
		{"FailsLate", hungErr, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), &sqlitestore.Config{BusyTimeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			wake := make(chan struct{})
			hung := make(chan struct{}, 1)
			sqlitestore.SetCommitHook(s, func() error {
				hung <- struct{}{}
				<-wake
				return tt.outcome
			})
			woken := false
			wakeUp := func() {
				if !woken {
					woken = true
					close(wake)
				}
			}
			defer wakeUp()

			now := time.Now()
			p := &idem.BeginParams{Scope: "s", Key: "k", Now: now}
			_, tx, err := s.Begin(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			rec := &idem.Record{Scope: "s", Key: "k", State: idem.StateCompleted, Result: idem.Result{Status: 201}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tx.Commit(cctx, &idem.CommitParams{Record: rec, Now: now}) }()
			<-hung
			select {
			case err := <-done:
				if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Commit: err = %v, want ErrUnavailable and DeadlineExceeded", err)
				}
			case <-time.After(20 * time.Second):
				wakeUp()
				<-done
				t.Fatal("Commit still waiting 20s after its 200ms deadline")
			}
			if sqlitestore.WriterSlotHeld(s) {
				t.Error("the writer slot is still held after the deadline")
			}
			// The key is free in this process: a retry is not refused as in
			// flight. SQLite's own write lock is still with the hung
			// COMMIT, so the retry waits BusyTimeout for it and gets
			// ErrUnavailable (503) rather than running.
			_, tx2, err := s.Begin(ctx, p)
			if tx2 != nil {
				_ = tx2.Rollback(ctx)
			}
			if !errors.Is(err, idem.ErrUnavailable) {
				t.Errorf("Begin on the key while the COMMIT hangs: err = %v, want ErrUnavailable", err)
			}

			wakeUp()
			// Once the COMMIT has ended the key is claimable again or
			// replayed, and the writer is free for other keys.
			var got *idem.Record
			for deadline := time.Now().Add(20 * time.Second); ; {
				got, tx2, err = s.Begin(ctx, p)
				if err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("Begin after the COMMIT ended: %v", err)
			}
			if tx2 != nil {
				_ = tx2.Rollback(ctx)
			}
			if (got != nil) != tt.wantRecord {
				t.Errorf("after the late COMMIT: record = %+v, want one: %v", got, tt.wantRecord)
			}
			if !tt.wantRecord && tx2 == nil {
				t.Error("the key could not be claimed after the failed COMMIT")
			}
			_, tx3, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "other", Now: now})
			if err != nil {
				t.Fatalf("Begin on another key: %v", err)
			}
			_ = tx3.Rollback(ctx)
		})
	}
}
