package main

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestParseLevels(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want []int
	}{
		{"1,8,32", []int{1, 8, 32}},
		{"4", []int{4}},
		{" 2, 16 ", []int{2, 16}},
		{"", nil},
		{"1,,2", nil},
		{"0", nil},
		{"-1", nil},
		{"x", nil},
	} {
		got, err := parseLevels(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("parseLevels(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseLevels(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "-concurrency", "1,zero"},
		{"bench", "-duration", "0s"},
		{"bench", "-storms", "0"},
		{"bench", "-pool", "0"},
		{"bench", "extra"},
	} {
		var out bytes.Buffer
		err := (&Main{Stdout: &out, Stderr: &out}).Run(t.Context(), args)
		if !errors.As(err, new(usageError)) {
			t.Errorf("Run(%q) = %v, want a usage error", args, err)
		}
	}
}
