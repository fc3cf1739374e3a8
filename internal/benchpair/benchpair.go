// Package benchpair measures two variants of the same work in one benchmark,
// interleaved, so that their ratio is taken on the same machine in the same
// moments and a noisy neighbour weighs on both alike.
package benchpair

import (
	"testing"
	"time"
)

// Variant is one side of a comparison: Round does a fixed amount of work
// (the same for both variants) and returns how long it took.
type Variant struct {
	Name  string
	Round func() time.Duration
}

// Ratio runs each variant once to warm up, then one round of each per
// b.Loop iteration, alternating which goes first. It reports both rates in
// <name>-<unit>/s, with perRound units per round, and the rate of other
// divided by the rate of base as <other>/<base>.
func Ratio(b *testing.B, perRound int, unit string, base, other Variant) {
	base.Round()
	other.Round()
	var baseTime, otherTime time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			baseTime += base.Round()
			otherTime += other.Round()
		} else {
			otherTime += other.Round()
			baseTime += base.Round()
		}
	}
	n := float64(b.N * perRound)
	b.ReportMetric(n/baseTime.Seconds(), base.Name+"-"+unit+"/s")
	b.ReportMetric(n/otherTime.Seconds(), other.Name+"-"+unit+"/s")
	b.ReportMetric(baseTime.Seconds()/otherTime.Seconds(), other.Name+"/"+base.Name)
}
