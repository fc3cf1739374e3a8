package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/redisstore"
)

func TestConfigIsValidated(t *testing.T) {
	// New sends nothing, so no server need answer: any client does.
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	for _, tc := range []struct {
		name  string
		cfg   redisstore.Config
		field string
	}{
		{"BraceInPrefix", redisstore.Config{Prefix: "a{b"}, "Prefix"},
		{"NegativeIndexes", redisstore.Config{PendingIndexes: -1}, "PendingIndexes"},
		{"TooManyIndexes", redisstore.Config{PendingIndexes: 1 << 20}, "PendingIndexes"},
		{"NegativeRetention", redisstore.Config{MinRetention: -time.Second}, "MinRetention"},
		{"NegativeReplicas", redisstore.Config{WaitReplicas: -1}, "WaitReplicas"},
		{"NegativeWaitTimeout", redisstore.Config{WaitTimeout: -time.Second}, "WaitTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redisstore.New(c, &tc.cfg)
			if err == nil || !strings.Contains(err.Error(), "Config."+tc.field) {
				t.Fatalf("New(%+v) = %v, want an error naming Config.%s", tc.cfg, err, tc.field)
			}
		})
	}
	if _, err := redisstore.New(c, nil); err != nil {
		t.Fatalf("New with a nil config: %v", err)
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Require(t)
	t.Run("RedisURL", func(t *testing.T) {
		c := redistest.Client(t)
		s, err := redisstore.Open(ctx, "redis://"+addr+"/0", &redisstore.Config{Prefix: redistest.Name(t, c)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		cl, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "k", Fingerprint: "fp", Now: time.Now(), Lease: time.Minute})
		if err != nil || !cl.Claimed {
			t.Fatalf("Claim through an opened store: %+v, %v", cl, err)
		}
	})
	t.Run("OtherScheme", func(t *testing.T) {
		_, err := redisstore.Open(ctx, "postgres://u:secret@"+addr, nil)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Fatalf("Open of a postgres:// URL = %v, want an error without the password", err)
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		_, err := redisstore.Open(ctx, "redis://u:secret@127.0.0.1:1/0?dial_timeout=1s", nil)
		if !errors.Is(err, idem.ErrUnavailable) || strings.Contains(err.Error(), "secret") {
			t.Fatalf("Open of an unreachable server = %v, want ErrUnavailable without the password", err)
		}
	})
}

// TestLeasedModeOnly: the store is neither an atomic store nor one with
// local steps, and a work's LocalStep says so instead of running.
func TestLeasedModeOnly(t *testing.T) {
	c := redistest.Client(t)
	s, err := redisstore.New(c, &redisstore.Config{Prefix: redistest.Name(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := any(s).(idem.Store); ok {
		t.Error("redisstore.Store is an idem.Store: atomic mode needs the work's writes in the store's database")
	}
	if _, ok := any(s).(idem.LeasedTxStore); ok {
		t.Error("redisstore.Store is an idem.LeasedTxStore: local steps need the work's writes in the store's database")
	}
	l, err := idem.NewLeased(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	_, _, err = l.Do(context.Background(), idem.LeasedRequest{Scope: "s", Key: "k", Fingerprint: "fp"},
		func(ctx context.Context, run *idem.Run) (idem.Result, error) {
			_, err := run.LocalStep(ctx, "debit", func(context.Context) ([]byte, error) {
				ran = true
				return nil, nil
			})
			return idem.Result{}, err
		})
	if err == nil || !strings.Contains(err.Error(), "no local transactions") || ran {
		t.Fatalf("a LocalStep on Redis: err %v, ran %v; want it refused without running", err, ran)
	}
}
