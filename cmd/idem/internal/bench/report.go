package bench

import "fmt"

// Report is the outcome of one Run. Its JSON form is the machine-readable
// report of "idem bench --json".
type Report struct {
	Backend     string  `json:"backend"`        // "sqlite" or "postgres"
	Database    string  `json:"database"`       // file path, or URL without password, and schema
	PoolSize    int     `json:"pool_max_conns"` // database connections shared by both services
	ReplayProbe bool    `json:"replay_probe"`   // pgstore.Config.ReplayProbe was on
	Machine     Machine `json:"machine"`
	Duration    string  `json:"duration"` // measured time per variant and level
	Rounds      int     `json:"rounds"`   // rounds per variant and level
	Concurrency []int   `json:"concurrency"`
	Started     string  `json:"started"`
	Elapsed     string  `json:"elapsed"`
	// Records is the records table after Config.LiveRecords were written
	// into it; nil without them.
	Records  *Records     `json:"records,omitempty"`
	Overhead []Comparison `json:"overhead"`
	// Replay compares replays, answered from the Guard's replay cache,
	// with first executions; ReplayStore the same replays through a
	// Guard with its in-process shortcuts off, answered by the store.
	Replay      []Comparison `json:"replay"`
	ReplayStore []Comparison `json:"replay_store"`
	// Storm is the duplicate storms through the service as it runs;
	// StormStore through a Guard with its in-process shortcuts off;
	// StormTwo split over two server instances on the database, each
	// with a pool and a Guard of its own (nil where the database allows
	// one process only: StormTwoNote says why).
	Storm        Storm  `json:"storm"`
	StormStore   Storm  `json:"storm_store"`
	StormTwo     *Storm `json:"storm_two"`
	StormTwoNote string `json:"storm_two_note,omitempty"`
	// Guard is what the idem service's Guard counted over the run.
	Guard  GuardCounters `json:"guard"`
	Ledger Ledger        `json:"ledger"`

	// Problems lists the broken invariants; empty when all held.
	Problems []string `json:"problems"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Go         string `json:"go"`
}

// Variant is what the clients measured for one variant of a scenario.
type Variant struct {
	Name      string         `json:"name"`
	Requests  int            `json:"requests"` // expected answers
	Errors    int            `json:"errors"`   // anything else: other statuses, transport errors
	Seconds   float64        `json:"seconds"`  // measured wall time (0 for storms)
	ReqPerSec float64        `json:"req_per_sec"`
	P50Ms     float64        `json:"p50_ms"`
	P99Ms     float64        `json:"p99_ms"`
	Statuses  map[string]int `json:"statuses"` // "201", "201 replayed", "409", "transport error", …
}

// Comparison is one scenario at one concurrency level: a base variant, the
// subject measured against it, and the ratio the bar judges.
type Comparison struct {
	Scenario    string  `json:"scenario"` // "overhead", "replay" or "replay-store"
	Concurrency int     `json:"concurrency"`
	Base        Variant `json:"base"`    // plain, or first executions
	Subject     Variant `json:"subject"` // idem, or replays
	Ratio       float64 `json:"ratio"`   // subject req/s ÷ base req/s
	Bar         Bar     `json:"bar"`
}

// namedStorm is a storm scenario and its name in the tables.
type namedStorm struct {
	name string
	st   *Storm // nil when the scenario did not run (storm-two on SQLite)
}

// storms returns the storm scenarios of rep in the order the tables show
// them.
func (rep *Report) storms() []namedStorm {
	return []namedStorm{{"storm", &rep.Storm}, {"storm-store", &rep.StormStore}, {"storm-two", rep.StormTwo}}
}

// Storm is the duplicate-storm scenario.
type Storm struct {
	Storms    int `json:"storms"`
	Size      int `json:"size"`      // concurrent requests per storm
	Instances int `json:"instances"` // server instances the storm is split over

	// Answers are the storm requests other than the one that executed
	// (409 or replay); Reads are all the requests of the read storms.
	Answers Variant `json:"answers"`
	Reads   Variant `json:"reads"`
	Ratio   float64 `json:"ratio"` // p99 answers ÷ p99 reads, over all storms
	Bar     Bar     `json:"bar"`

	// MedianPairRatio is the median, over the storms, of the p99 of one
	// storm's answers ÷ the p99 of the read storm run next to it: less
	// sensitive than Ratio to one storm hit by a pause on the machine.
	MedianPairRatio float64 `json:"median_pair_ratio"`

	// Effects is the number of transfers the storms applied, read on the
	// destination account's balance: one per storm when all is well.
	Effects  int64 `json:"effects"`
	Executed int   `json:"executed"`  // answers 201 not replayed
	Replayed int   `json:"replayed"`  // answers 201 replayed
	InFlight int   `json:"in_flight"` // answers 409
	Other    int   `json:"other"`     // anything else
}

// GuardCounters are the Guard's in-process answers (idem.GuardStats).
type GuardCounters struct {
	ReplayCacheHits   uint64 `json:"replay_cache_hits"`
	ReplayCacheMisses uint64 `json:"replay_cache_misses"`
	ReplayCacheBytes  int64  `json:"replay_cache_bytes"`
	LocalInFlight     uint64 `json:"in_flight_local"`
}

// Ledger is the audit at the end of the run.
type Ledger struct {
	Transfers int64 `json:"transfers"` // rows added to the transfers table
	Created   int64 `json:"created"`   // 201 answers that were not replays
	Conserved bool  `json:"conserved"` // the sum of the bench accounts' balances did not change
}

// Bar is a performance threshold (docs/DESIGN.md).
type Bar struct {
	Op    string  `json:"op"` // ">=" or "<="
	Value float64 `json:"value"`
	// Applies is false where docs/DESIGN.md does not set this bar (the
	// overhead bar is for PostgreSQL); Pass is then only indicative.
	Applies bool   `json:"applies"`
	Pass    bool   `json:"pass"`
	Note    string `json:"note,omitempty"`
}

func newBar(op string, value, ratio float64, applies bool, note string) Bar {
	b := Bar{Op: op, Value: value, Applies: applies, Note: note}
	switch op {
	case ">=":
		b.Pass = ratio >= value
	case "<=":
		b.Pass = ratio > 0 && ratio <= value
	}
	return b
}

// String is the bar as the table prints it: "≥ 0.85".
func (b Bar) String() string {
	op := "≥"
	if b.Op == "<=" {
		op = "≤"
	}
	s := fmt.Sprintf("%s %g", op, b.Value)
	if b.Note != "" {
		s += " (" + b.Note + ")"
	}
	return s
}

// Verdict is "pass", "MISS", or, where the bar does not apply, "n/a".
func (b Bar) Verdict() string {
	switch {
	case !b.Applies:
		return "n/a"
	case b.Pass:
		return "pass"
	default:
		return "MISS"
	}
}
