package redisstore

import "github.com/redis/go-redis/v9"

// The record scripts. KEYS are a record's keys (recordKeys): the record,
// its steps and their order, all in one hash slot. Times are Unix
// microseconds passed by the caller (Redis's clock is never read); a token
// is compared as the decimal text it is stored as, and grows with
// HINCRBY, so that it stays exact.
//
// A record is a hash: s scope, k key, fp fingerprint, st state ("pending"
// or "completed"), tok token, ie index epoch, seq write count, cr created,
// ex expires, lu lease until, kind, in input, att attempts, err last
// error, ttl the TTL it was claimed with (microseconds; absent on records
// written before it was kept, read as 0, "unknown"), rs result status, rh
// result headers, rb result body. (ie, seq) is the record's version in the
// pending index (see index.go).

// fencedLua starts every fenced script: ARGV[1] is the holder's token.
const fencedLua = `
local f = redis.call('HMGET', KEYS[1], 'st', 'tok')
if f[1] ~= 'pending' or f[2] ~= ARGV[1] then
  return 'fenced'
end
`

// claimScript claims the record. ARGV: fingerprint, kind, input, now,
// lease until, indexed ("1" once the member is in the pending index),
// epoch, scope, key, the pending ExpiresAt, the candidate token
// (now in microseconds), the TTL of a new record (microseconds; a
// takeover keeps the record's). It answers {2} when it would write a new record
// and indexed is not "1" (nothing is written), {1, record, names,
// outputs} when it claimed, {0, record} otherwise.
var claimScript = redis.NewScript(`
local rec = KEYS[1]
local now = tonumber(ARGV[4])
local function reply(claimed)
  local r = redis.call('HGETALL', rec)
  if claimed == 0 then
    return {0, r}
  end
  local names = redis.call('LRANGE', KEYS[3], 0, -1)
  local outs = {}
  for i, name in ipairs(names) do
    outs[i] = redis.call('HGET', KEYS[2], name)
  end
  return {1, r, names, outs}
end
local f = redis.call('HMGET', rec, 'st', 'lu', 'fp', 'ex', 'tok')
if f[1] == 'pending' then
  if tonumber(f[2]) <= now and f[3] == ARGV[1] then
    redis.call('HINCRBY', rec, 'tok', 1)
    redis.call('HINCRBY', rec, 'att', 1)
    redis.call('HINCRBY', rec, 'seq', 1)
    redis.call('HSET', rec, 'lu', ARGV[5])
    return reply(1)
  end
  return reply(0)
end
if f[1] == 'completed' and tonumber(f[4]) > now then
  return reply(0)
end
if ARGV[6] ~= '1' then
  return {2}
end
redis.call('DEL', rec, KEYS[2], KEYS[3])
redis.call('HSET', rec, 's', ARGV[8], 'k', ARGV[9], 'fp', ARGV[1], 'st', 'pending',
  'tok', ARGV[11], 'ie', ARGV[7], 'seq', 1, 'cr', ARGV[4], 'ex', ARGV[10], 'lu', ARGV[5],
  'kind', ARGV[2], 'in', ARGV[3], 'att', 1, 'err', '', 'ttl', ARGV[12])
local old = f[5]
if old and tonumber(old) >= tonumber(ARGV[11]) then
  redis.call('HSET', rec, 'tok', old)
  redis.call('HINCRBY', rec, 'tok', 1)
end
return reply(1)
`)

// heartbeatScript extends the lease (fenced). ARGV: token, lease until.
// It answers the record's version {ie, seq}.
var heartbeatScript = redis.NewScript(fencedLua + `
redis.call('HSET', KEYS[1], 'lu', ARGV[2])
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
return {redis.call('HGET', KEYS[1], 'ie'), seq}
`)

// saveStepScript records a step (fenced). ARGV: token, name, output. A
// name saved before keeps its place in the order.
var saveStepScript = redis.NewScript(fencedLua + `
if redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) == 1 then
  redis.call('RPUSH', KEYS[3], ARGV[2])
end
return 'ok'
`)

// completeScript completes the record (fenced), deletes its steps and
// gives it a time to live. ARGV: token, status, headers, body, expires,
// time to live in milliseconds. It answers the version {ie, seq}.
var completeScript = redis.NewScript(fencedLua + `
redis.call('HSET', KEYS[1], 'st', 'completed', 'rs', ARGV[2], 'rh', ARGV[3], 'rb', ARGV[4],
  'ex', ARGV[5], 'err', '')
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {redis.call('HGET', KEYS[1], 'ie'), seq}
`)

// releaseScript ends the lease without completing (fenced). ARGV: token,
// retry at, error. It answers the version {ie, seq}.
var releaseScript = redis.NewScript(fencedLua + `
redis.call('HSET', KEYS[1], 'lu', ARGV[2], 'err', ARGV[3])
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
return {redis.call('HGET', KEYS[1], 'ie'), seq}
`)

// The pending-index scripts. KEYS are one part of the index (indexKeys):
// the sorted set, the versions and the epoch counter. A version is
// "epoch:seq"; a newer one is greater in epoch, then in seq.

// applyLua applies ARGV[3] ("set" or "rem") to member ARGV[1], with the
// version ARGV[4]:ARGV[5] and, for "set", the score ARGV[6].
const applyLua = `
local function apply()
  if ARGV[3] == 'set' then
    redis.call('HSET', KEYS[2], ARGV[1], ARGV[4] .. ':' .. ARGV[5])
    redis.call('ZADD', KEYS[1], ARGV[6], ARGV[1])
  else
    redis.call('HDEL', KEYS[2], ARGV[1])
    redis.call('ZREM', KEYS[1], ARGV[1])
  end
  return 1
end
`

// reserveScript puts member ARGV[1] in the index before a claim may write
// a new record: it takes a new epoch, records the version "epoch:0" and
// lowers the member's score to ARGV[2] (adding it if absent). It answers
// the epoch.
var reserveScript = redis.NewScript(`
local e = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[2], ARGV[1], e .. ':0')
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not cur or tonumber(ARGV[2]) < tonumber(cur) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
end
return e
`)

// updateScript applies an update of version ARGV[4]:ARGV[5] unless the
// member's version is newer. ARGV: member, unused, op, epoch, seq, score.
// It answers 1 if it applied.
var updateScript = redis.NewScript(applyLua + `
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
  local se, sq = string.match(cur, '^(%d+):(%d+)$')
  local e, q = tonumber(ARGV[4]), tonumber(ARGV[5])
  se, sq = tonumber(se), tonumber(sq)
  if e < se or (e == se and q < sq) then
    return 0
  end
end
return apply()
`)

// swapScript applies an update only if the member's version is still
// ARGV[2] ("" for none). ARGV: member, seen, op, epoch, seq, score. It
// answers 1 if it applied.
var swapScript = redis.NewScript(applyLua + `
if (redis.call('HGET', KEYS[2], ARGV[1]) or '') ~= ARGV[2] then
  return 0
end
return apply()
`)

// lowerScript lowers the score of member ARGV[1] to ARGV[2], if it is in
// the index with a higher one.
var lowerScript = redis.NewScript(`
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if cur and tonumber(ARGV[2]) < tonumber(cur) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
end
return 1
`)

// dueScript answers the members whose score is at most ARGV[1], from
// offset ARGV[2], at most ARGV[3] of them, lowest score first: a flat
// list of member, score, version ("" for none).
var dueScript = redis.NewScript(`
local ms = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', ARGV[2], ARGV[3])
local out = {}
for i = 1, #ms, 2 do
  out[#out + 1] = ms[i]
  out[#out + 1] = ms[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], ms[i]) or ''
end
return out
`)
