package redisstore

import "github.com/redis/go-redis/v9"

// The operators' scripts (admin.go). The audit log of a Prefix is two keys
// in the slot of the tag {<prefix>:audit}: a counter (the last ID) and a
// hash ID -> entry. An entry is a sequence of netstrings ("<len>:<bytes>")
// of names and values: "@at", "@actor", "@action", "@reason", "@status",
// then the record's hash as it was (names without '@').

// changeScript forgets or resolves a record and appends its audit entry,
// in one run. KEYS: the record's keys (recordKeys), then the audit counter
// and entries. ARGV: mode ("forget" or "resolve"), token ("0" for any),
// now, force ("1"), at, actor, action, reason, status, then for resolve
// the result's status, headers and body, its expires and the time to live
// in milliseconds. It answers {refusal} ("missing", "fenced", "notpending",
// "live", "pending") or {"ok", record as it was, ie, seq}.
var changeScript = redis.NewScript(`
local f = redis.call('HGETALL', KEYS[1])
if #f == 0 then
  return {'missing'}
end
local r = {}
for i = 1, #f, 2 do
  r[f[i]] = f[i + 1]
end
if ARGV[2] ~= '0' and r['tok'] ~= ARGV[2] then
  return {'fenced'}
end
local pending = r['st'] == 'pending'
if ARGV[1] == 'resolve' and not pending then
  return {'notpending'}
end
if pending and tonumber(r['lu']) > tonumber(ARGV[3]) then
  return {'live'}
end
if ARGV[1] == 'forget' and pending and ARGV[4] ~= '1' then
  return {'pending'}
end
local function ns(s)
  return #s .. ':' .. s
end
local parts = {ns('@at'), ns(ARGV[5]), ns('@actor'), ns(ARGV[6]), ns('@action'), ns(ARGV[7]),
  ns('@reason'), ns(ARGV[8]), ns('@status'), ns(ARGV[9])}
for i = 1, #f do
  parts[#parts + 1] = ns(f[i])
end
local id = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[5], id, table.concat(parts))
redis.call('DEL', KEYS[2], KEYS[3])
if ARGV[1] == 'forget' then
  redis.call('DEL', KEYS[1])
  return {'ok', f, r['ie'], tonumber(r['seq']) + 1}
end
redis.call('HSET', KEYS[1], 'st', 'completed', 'rs', ARGV[10], 'rh', ARGV[11], 'rb', ARGV[12],
  'ex', ARGV[13], 'err', '')
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[14])
return {'ok', f, r['ie'], seq}
`)

// auditScript reads a page of the audit log, newest first. KEYS: the
// audit counter and entries. ARGV: the cursor (the ID below which to
// start; "0" for the newest, and never above the last ID, so that the
// loop is bounded by the log), the limit. It answers a flat list of ID,
// entry.
var auditScript = redis.NewScript(`
local top = tonumber(redis.call('GET', KEYS[1]) or '0')
local c = tonumber(ARGV[1])
if c > 0 and c - 1 < top then
  top = c - 1
end
local out = {}
local id = top
while id >= 1 and #out < 2 * tonumber(ARGV[2]) do
  local e = redis.call('HGET', KEYS[2], id)
  if e then
    out[#out + 1] = id
    out[#out + 1] = e
  end
  id = id - 1
end
return out
`)

// stepsScript answers a record's steps in the order saved: a flat list
// of name, output. KEYS: the record's keys.
var stepsScript = redis.NewScript(`
local names = redis.call('LRANGE', KEYS[3], 0, -1)
local out = {}
for _, name in ipairs(names) do
  out[#out + 1] = name
  out[#out + 1] = redis.call('HGET', KEYS[2], name) or ''
end
return out
`)
