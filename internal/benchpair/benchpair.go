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
	Rates(b, perRound, unit, base, other)
}

// Rates is Ratio for any number of variants: a round of each per b.Loop
// iteration, the first of them rotating, each rate reported as
// <name>-<unit>/s and each against base's as <name>/<base>.
func Rates(b *testing.B, perRound int, unit string, base Variant, others ...Variant) {
	vs := append([]Variant{base}, others...)
	times := make([]time.Duration, len(vs))
	for _, v := range vs {
		v.Round() // warm up
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range vs {
			k := (i + j) % len(vs)
			times[k] += vs[k].Round()
		}
	}
	n := float64(b.N * perRound)
	for k, v := range vs {
		b.ReportMetric(n/times[k].Seconds(), v.Name+"-"+unit+"/s")
		if k > 0 {
			b.ReportMetric(times[0].Seconds()/times[k].Seconds(), v.Name+"/"+base.Name)
		}
	}
}
