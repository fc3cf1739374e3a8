package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNameDeletesItsKeys: the keys that contain a Name are gone when its
// test ends, and no other key is touched.
func TestNameDeletesItsKeys(t *testing.T) {
	ctx := context.Background()
	c := Client(t)
	other := Name(t, c) // deleted only when this test ends
	if err := c.Set(ctx, "x:"+other, "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	t.Run("Use", func(t *testing.T) {
		name := Name(t, c)
		if !strings.HasPrefix(name, "idemtest_") || name == other {
			t.Fatalf("Name = %q", name)
		}
		for i := range 1200 { // more than one SCAN page and one UNLINK
			keys = append(keys, "x:"+name+":"+strconv.Itoa(i))
		}
		for _, k := range keys {
			if err := c.Set(ctx, k, "1", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	n, err := c.Exists(ctx, keys...).Result()
	if err != nil || n != 0 {
		t.Fatalf("%d of the subtest's keys left, %v", n, err)
	}
	if n, err := c.Exists(ctx, "x:"+other).Result(); err != nil || n != 1 {
		t.Fatalf("another name's key was deleted: %d, %v", n, err)
	}
}
