-- uses: lib_lease.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_acquire.lua: one acquire attempt on lock N, first or repeated.
-- KEYS: lib_lock.lua
-- ARGV: name lease request_id ttl_ms max_hold_ms owner wait instance attach claim_ms
-- ARGV: max_waiters request_id_ttl_ms
--   lease: a fresh id, or the id this request already has; request_id: "" for none;
--   wait: "1" to queue; instance: the gateway's id; attach: the asking connection's id
-- Returns JSON {r=...}:
--   granted {lease, fence, ttl, expires_at}  the caller holds the lock
--   queued  {lease, position, holder_pttl}   the caller waits in the queue
--   busy    {waiting}                        not free and the caller will not wait
--   full    {waiting}                        the queue is at max_waiters (waiters of
--                                            dead gateways are dropped first)
--   ended   {lease}                          this request_id's lease is over
--   nofence {}                               no fence may be issued (lib_lease.lua)
local name, lease, rid = A_name, A_lease, A_request_id
local ttl, max_hold, owner, wait = tonumber(A_ttl_ms), tonumber(A_max_hold_ms), A_owner, A_wait == '1'
local inst, attach, claim_ms = A_instance, A_attach, tonumber(A_claim_ms)
local max_waiters, rid_ttl = tonumber(A_max_waiters), tonumber(A_request_id_ttl_ms)
local k = lock_keys()

if not fence_ready(k) then return cjson.encode({r = 'nofence'}) end
local now = now_ms()

local prior = rid_lease(k, rid, now)
local known = prior ~= nil
if known then lease = prior end

local holder = redis.call('HMGET', k.h, 'lease', 'claimed')
if holder[1] == lease then
  local expires_at = now + redis.call('PTTL', k.h)
  if holder[2] == '0' then expires_at = claim(k, now, attach) end
  return granted_reply(k, lease, expires_at)
end

-- Takes the free lock, nobody waiting: the uncontended case.
local function take()
  if known then return cjson.encode({r = 'ended', lease = lease}) end
  index_add(k, name)
  local fence = decimal(redis.call('INCR', k.fence))
  redis.call('HSET', k.h, 'lease', lease, 'fence', fence, 'owner', owner, 'ttl', A_ttl_ms,
             'hold_until', decimal(now + max_hold), 'granted_at', decimal(now), 'claimed', '1',
             'rid', rid, 'inst', inst, 'attach', attach)
  redis.call('PEXPIRE', k.h, A_ttl_ms)
  rid_hold(k, rid, lease, now + ttl, now)
  return granted_json(lease, fence, A_ttl_ms, decimal(now + ttl))
end

-- A free lock with an empty queue (its first waiter is looked at once).
if not holder[1] and not redis.call('ZRANGE', k.q, '0', '0')[1] then return take() end

local queued = redis.call('ZSCORE', k.q, lease)
if known and not queued then return cjson.encode({r = 'ended', lease = lease}) end

if not holder[1] then
  local granted = grant_next(k, name, claim_ms, now)
  if granted == lease then return granted_reply(k, lease, claim(k, now, attach)) end
  if not granted and not queued then return take() end
end

if not queued then
  local waiting = redis.call('ZCARD', k.q)
  if not wait then return cjson.encode({r = 'busy', waiting = waiting}) end
  if waiting >= max_waiters then
    waiting = waiting - purge_dead_waiters(k, k.q, k.w, now)
    if waiting >= max_waiters then return cjson.encode({r = 'full', waiting = waiting}) end
  end
  local last = redis.call('ZRANGE', k.q, -1, -1, 'WITHSCORES')[2]
  index_add(k, name)
  redis.call('ZADD', k.q, (tonumber(last) or 0) + 1, lease)
end
rid_keep(k, rid, lease, now + rid_ttl, now)
redis.call('HSET', k.w, lease, cjson.encode({inst = inst, attach = attach, ttl = ttl,
           max_hold = max_hold, owner = owner, rid = rid}))
return cjson.encode({r = 'queued', lease = lease, position = redis.call('ZRANK', k.q, lease),
                     holder_pttl = redis.call('PTTL', k.h)})
