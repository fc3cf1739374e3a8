package idem_test

import (
	"log/slog"
	"testing"

	"github.com/idemkit/idem"
)

// Every outcome has a level: what every request ends in is Debug, so that a
// server logging at Info writes no line per request; what needs an
// operator's attention is Warn; the server's own failures are Error.
func TestOutcomeLevel(t *testing.T) {
	t.Parallel()
	want := map[idem.Outcome]slog.Level{
		idem.OutcomeExecuted: slog.LevelDebug, idem.OutcomeReplayed: slog.LevelDebug,
		idem.OutcomeInFlight: slog.LevelDebug, idem.OutcomeInvalidKey: slog.LevelDebug,
		idem.OutcomeMissingKey: slog.LevelDebug, idem.OutcomeCanceled: slog.LevelDebug,
		idem.OutcomeRequestTimeout: slog.LevelDebug, idem.OutcomeTooLarge: slog.LevelDebug,
		idem.OutcomeUnprotected: slog.LevelDebug, idem.OutcomeBadRequest: slog.LevelDebug,
		idem.OutcomeMismatch: slog.LevelWarn, idem.OutcomeFailOpen: slog.LevelWarn,
		idem.OutcomeRolledBack: slog.LevelWarn, idem.OutcomeReleased: slog.LevelWarn,
		idem.OutcomeTooBusy: slog.LevelWarn, idem.OutcomeNoPrincipal: slog.LevelWarn,
		idem.OutcomeUnavailable: slog.LevelError, idem.OutcomeResponseTooLarge: slog.LevelError,
		idem.OutcomePanic: slog.LevelError, idem.OutcomeError: slog.LevelError,
		idem.OutcomeLeaseLost: slog.LevelError,
	}
	if got, want := len(idem.Outcomes()), len(want); got != want {
		t.Fatalf("Outcomes() has %d outcomes, the table %d", got, want)
	}
	for _, o := range idem.Outcomes() {
		l, ok := want[o]
		if !ok {
			t.Errorf("%s: not in the table", o)
			continue
		}
		if got := o.Level(); got != l {
			t.Errorf("%s.Level() = %s, want %s", o, got, l)
		}
	}
}
