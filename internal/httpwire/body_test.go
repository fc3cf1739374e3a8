package httpwire

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadBody(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		body          string
		contentLength int64
		limit         int64
		want          string
		wantErr       error
	}{
		{"Sized", "hello", 5, 10, "hello", nil},
		{"SizedAtLimit", "hello", 5, 5, "hello", nil},
		{"SizedOverLimit", "hello", 5, 4, "", ErrBodyTooLarge},
		{"LongerThanItsLength", "hello!", 5, 10, "", ErrBodyTooLarge},
		{"ShorterThanItsLength", "hell", 5, 10, "", io.ErrUnexpectedEOF},
		{"Unsized", "hello", -1, 10, "hello", nil},
		{"UnsizedAtLimit", "hello", -1, 5, "hello", nil},
		{"UnsizedOverLimit", "hello", -1, 4, "", ErrBodyTooLarge},
		{"Empty", "", 0, 10, "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ReadBody(iotest.OneByteReader(strings.NewReader(tt.body)), tt.contentLength, tt.limit)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err: got %v, want %v", err, tt.wantErr)
			}
			if err == nil && string(got) != tt.want {
				t.Errorf("body: got %q, want %q", got, tt.want)
			}
		})
	}
}

// A body of known length costs one allocation of its own size.
func TestReadAllocatesOnce(t *testing.T) {
	body := strings.Repeat("x", 1<<20)
	r := strings.NewReader(body)
	allocs := testing.AllocsPerRun(10, func() {
		r.Reset(body)
		b, err := ReadBody(r, int64(len(body)), 1<<20)
		if err != nil || len(b) != len(body) {
			t.Fatalf("Read: %d bytes, %v", len(b), err)
		}
	})
	if allocs > 1 {
		t.Errorf("allocations per read: got %v, want 1", allocs)
	}
}
