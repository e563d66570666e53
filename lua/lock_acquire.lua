-- uses: lib_lease.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_acquire.lua: one acquire attempt on lock N, first or repeated.
-- KEYS[1] holder hash, KEYS[2] queue, KEYS[3] waiter hash, KEYS[4] "fg:fence"
-- ARGV: base, name, lease (a fresh id, or the id this request already has),
--       request_id ("" for none), ttl_ms, max_hold_ms, owner, wait ("1" to queue),
--       gateway instance id, attach id, claim_ms, max_waiters, request_id ttl ms
-- Returns JSON {r=...}:
--   granted {lease, fence, ttl, expires_at}  the caller holds the lock
--   queued  {lease, position, holder_pttl}   the caller waits in the queue
--   busy    {waiting}                        not free and the caller will not wait
--   full    {waiting}                        the queue is at max_waiters
--   ended   {lease}                          this request_id's lease is over
--   nofence {}                               no fence may be issued (lib_lease.lua)
local base, name, lease, rid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, max_hold, owner, wait = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8] == '1'
local inst, attach, claim_ms = ARGV[9], ARGV[10], tonumber(ARGV[11])
local max_waiters, rid_ttl = tonumber(ARGV[12]), tonumber(ARGV[13])
local hkey, qkey, wkey, fence_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

if not fence_ready(fence_key) then return cjson.encode({r = 'nofence'}) end
local now = now_ms()
index_add('fg:idx:lk', name)

local known = false
if rid ~= '' then
  local prior = redis.call('GET', base .. 'r:' .. rid)
  if prior then lease, known = prior, true end
end

local holder = redis.call('HMGET', hkey, 'lease', 'claimed')
if holder[1] == lease then
  local expires_at = now + redis.call('PTTL', hkey)
  if holder[2] == '0' then expires_at = claim(hkey, now, attach) end
  return granted_reply(hkey, lease, expires_at)
end

local queued = redis.call('ZSCORE', qkey, lease)
if known and not queued then return cjson.encode({r = 'ended', lease = lease}) end

if not holder[1] then
  local granted = grant_next(base, fence_key, name, claim_ms, now)
  if granted == lease then return granted_reply(hkey, lease, claim(hkey, now, attach)) end
  if not granted and not queued then
    local fence = redis.call('INCR', fence_key)
    redis.call('HSET', hkey, 'lease', lease, 'fence', fence, 'owner', owner, 'ttl', ttl,
               'hold_until', now + max_hold, 'granted_at', now, 'claimed', '1', 'rid', rid, 'inst', inst, 'attach', attach)
    redis.call('PEXPIRE', hkey, ttl)
    if rid ~= '' then redis.call('SET', base .. 'r:' .. rid, lease, 'PX', rid_ttl) end
    return cjson.encode({r = 'granted', lease = lease, fence = fence, ttl = ttl, expires_at = now + ttl})
  end
end

if not queued then
  local waiting = redis.call('ZCARD', qkey)
  if not wait then return cjson.encode({r = 'busy', waiting = waiting}) end
  if waiting >= max_waiters then return cjson.encode({r = 'full', waiting = waiting}) end
  local last = redis.call('ZRANGE', qkey, -1, -1, 'WITHSCORES')[2]
  redis.call('ZADD', qkey, (tonumber(last) or 0) + 1, lease)
  if rid ~= '' then redis.call('SET', base .. 'r:' .. rid, lease, 'PX', rid_ttl) end
end
redis.call('HSET', wkey, lease, cjson.encode({inst = inst, attach = attach, ttl = ttl,
           max_hold = max_hold, owner = owner, rid = rid}))
return cjson.encode({r = 'queued', lease = lease, position = redis.call('ZRANK', qkey, lease),
                     holder_pttl = redis.call('PTTL', hkey)})
