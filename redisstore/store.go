package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

var _ idem.LeasedStore = (*Store)(nil)

// ErrNotReplicated matches the error of a write that fewer replicas than
// Config.WaitReplicas acknowledged within Config.WaitTimeout. The write was
// made on the master; a failover before it reaches a replica loses it. The
// error matches idem.ErrUnavailable too.
var ErrNotReplicated = errors.New("redisstore: write not acknowledged by enough replicas")

var errUnsupportedClient = errors.New("redisstore: Reindex needs a *redis.Client or a *redis.ClusterClient")

// Store is a leased-mode store (an idem.LeasedStore) on Redis. It is safe
// for concurrent use. It is not an idem.Store (atomic mode) nor an
// idem.LeasedTxStore (local steps): both commit the work's own writes with
// the record, and Redis is not the database where those writes live (see
// docs/REDIS.md).
type Store struct {
	c     redis.UniversalClient
	cfg   Config
	owned bool // Close closes c
}

// New returns a Store on c: a *redis.Client, a *redis.ClusterClient or a
// *redis.FailoverClient. It sends nothing to the server, and Close leaves c
// open.
func New(c redis.UniversalClient, cfg *Config) (*Store, error) {
	if c == nil {
		return nil, errors.New("redisstore: New: nil client")
	}
	v, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{c: c, cfg: v}, nil
}

// Open connects to the Redis server of rawURL, in go-redis's URL form:
// redis://[user:password@]host:port[/db][?options], or rediss:// for TLS,
// and checks that it answers. The Store owns the connection: Close closes
// it.
//
// A URL with a master_name parameter names Redis Sentinels instead, in
// go-redis's failover URL form (redis.ParseFailoverURL):
// redis://[user:password@]sentinel1:26379[/db]?master_name=mymaster&addr=sentinel2:26379&addr=…,
// where user:password are the sentinels' and ?password= the master's.
// The store then uses go-redis's failover client, which asks the
// sentinels for the current master and follows it when they fail over
// (docs/REDIS.md, "Redis Sentinel").
func Open(ctx context.Context, rawURL string, cfg *Config) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		return nil, fmt.Errorf("redisstore: Open: want a redis:// or rediss:// URL, got %q", redactURL(rawURL))
	}
	var c *redis.Client
	if u.Query().Has(sentinelMasterParam) {
		opt, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: Open %s: %w", redactURL(rawURL), err)
		}
		if opt.MasterName == "" {
			return nil, fmt.Errorf("redisstore: Open %s: ?%s= is empty; name the master the sentinels watch", redactURL(rawURL), sentinelMasterParam)
		}
		c = redis.NewFailoverClient(opt)
	} else {
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: Open %s: %w", redactURL(rawURL), err)
		}
		c = redis.NewClient(opt)
	}
	s, err := New(c, cfg)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	s.owned = true
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: redisstore: Open %s: %w", idem.ErrUnavailable, redactURL(rawURL), err)
	}
	return s, nil
}

// sentinelMasterParam is the parameter that makes Open's URL one of
// sentinels: the name of the master they watch.
const sentinelMasterParam = "master_name"

// redactURL hides the passwords of a URL (its user's and a failover
// URL's ?password=), for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return "…" + raw[i:]
		}
		return raw
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Client returns the client the store uses.
func (s *Store) Client() redis.UniversalClient { return s.c }

// Close closes the client if Open made it; a Store from New leaves its
// client to its owner.
func (s *Store) Close() error {
	if s.owned {
		return s.c.Close()
	}
	return nil
}

// run runs script sc on keys (of one hash slot). With wait and
// Config.WaitReplicas, the script and a WAIT go in one pipeline on the
// connection to the keys' master, so that WAIT counts the replicas that
// have the script's writes.
func (s *Store) run(ctx context.Context, op string, sc *redis.Script, keys []string, wait bool, args ...any) (any, error) {
	if s.cfg.WaitReplicas == 0 || !wait {
		v, err := sc.Run(ctx, s.c, keys, args...).Result()
		return v, s.wrap(op, err)
	}
	var node redis.Cmdable = s.c
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, s.wrap(op, err)
		}
		node = n
	}
	for attempt := 0; ; attempt++ {
		var ev *redis.Cmd
		var waitCmd *redis.Cmd
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			ev = sc.EvalSha(ctx, p, keys, args...)
			waitCmd = p.Do(ctx, "WAIT", s.cfg.WaitReplicas, s.cfg.WaitTimeout.Milliseconds())
			return nil
		})
		v, err := ev.Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0 {
			if err := sc.Load(ctx, node).Err(); err != nil {
				return nil, s.wrap(op, err)
			}
			continue
		}
		if err != nil {
			return nil, s.wrap(op, err)
		}
		n, err := waitCmd.Int64()
		if err != nil {
			return nil, s.wrap(op+": WAIT", err)
		}
		if n < int64(s.cfg.WaitReplicas) {
			return nil, fmt.Errorf("%w: %w: %s: %d of %d replicas within %s",
				idem.ErrUnavailable, ErrNotReplicated, op, n, s.cfg.WaitReplicas, s.cfg.WaitTimeout)
		}
		return v, nil
	}
}

// wrap turns an error of Redis into the store's: a cancelled or expired
// context stays itself, anything else matches idem.ErrUnavailable.
//
// On a cluster, a failure other than an answer of Redis (a node that does
// not answer) makes the client reload its map of slots: go-redis does so
// by itself only on a MOVED answer and every ClusterStateReloadInterval
// (a minute by default), so after a failover it would keep calling the
// dead master until then (docs/REDIS.md).
func (s *Store) wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	var answer redis.Error
	if cc, ok := s.c.(*redis.ClusterClient); ok && (!errors.As(err, &answer) || redis.HasErrorPrefix(err, "CLUSTERDOWN")) {
		cc.ReloadState(context.Background())
	}
	return fmt.Errorf("%w: redisstore: %s: %w", idem.ErrUnavailable, op, err)
}
