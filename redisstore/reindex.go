package redisstore

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// Reindex reads every record of the store's Prefix (with SCAN, on every
// master of a cluster) and puts each pending one back in the pending
// index, unless the index holds a newer version of it. It returns how many
// pending records it read. Run it after Redis lost part of the index but
// not the records (a node of a cluster restarted without persistence, a
// failover that lost the index's last writes): Abandoned finds only
// indexed records (docs/REDIS.md). It is safe while the store is in use.
func (s *Store) Reindex(ctx context.Context) (int, error) {
	pattern := "{" + globEscaper.Replace(s.cfg.Prefix) + ":*}:rec"
	var n atomic.Int64 // masters are scanned concurrently
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			m, ok := strings.CutSuffix(strings.TrimPrefix(key, "{"), "}:rec")
			if !ok || !strings.HasPrefix(key, "{") {
				continue
			}
			f, err := c.HGetAll(ctx, key).Result()
			if err != nil {
				return err
			}
			if len(f) == 0 {
				continue
			}
			st, err := recordFromFields(f)
			if err != nil {
				return err
			}
			// Another prefix may match the pattern ("idem:x" for "idem"):
			// a record is this store's if its name is the one this
			// store gives its scope and key.
			if st.rec.State == idem.StatePending && s.member(st.rec.Scope, st.rec.Key) == m {
				n.Add(1)
				if _, err := s.run(ctx, "reindex", updateScript, s.indexKeys(s.indexOf(m)), true,
					m, "", "set", st.ver.epoch, st.ver.seq, micros(st.rec.LeaseUntil)); err != nil {
					return err
				}
			}
		}
		return iter.Err()
	}
	var err error
	switch c := s.c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		return 0, s.wrap("reindex", errUnsupportedClient)
	}
	return int(n.Load()), s.wrap("reindex", err)
}

// globEscaper escapes the characters SCAN's MATCH treats as a pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)
