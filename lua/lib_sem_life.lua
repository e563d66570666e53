-- SPDX-License-Identifier: Apache-2.0
-- lib_sem_life.lua: the lives of a semaphore's holders and keys, on a key
-- table its script makes (lib_sem.lua sem_keys, or the few keys a renewal
-- names, sem_renew.lua): a holder's expiry, a slot taken beside others, a
-- grant claimed and the end of a release, moving a first holder out of the
-- limit key, and the keys' times to live (prepended to every script whose
-- first line names it, before lib_sem.lua; never called on its own). It reads
-- no KEYS itself.

-- Sets the expiry of holder lease to expires_at (ms; text: the same as decimal
-- text, when the caller has it), noting it for tidy; the holders' count a
-- caller kept (lib_sem.lua purge_count) is unknown then.
local function set_expiry(k, lease, expires_at, text)
  redis.call('ZADD', k.h, text or decimal(expires_at), lease)
  if k.held then k.held = false end
  if expires_at > k.latest then k.latest = expires_at end
  if k.first and (k.first == -1 or expires_at < k.first) then k.first = expires_at end
end

-- Starts the full lease of holder record rec (granted, maybe unclaimed) on
-- behalf of connection attach, for its ttl up to its hold deadline
-- (claim_ttl), and keeps its request_id for as long as it holds. Returns the
-- expiry time.
local function claim(k, lease, rec, now, attach)
  rec.claimed = 1
  rec.attach = attach
  redis.call('HSET', k.d, lease, record_json(rec))
  local expires_at = now + claim_ttl(rec.ttl, rec.granted_at, rec.max_hold, now)
  set_expiry(k, lease, expires_at)
  rid_extend_set(k, rec.rid, expires_at)
  return expires_at
end

-- The reply for a lease that holds a slot.
local function granted_reply(lease, rec, expires_at, handoff)
  return lease_reply('granted', handoff, R_LEASE, lease, R_FENCE, decimal(rec.fence),
                     R_TTL, decimal(rec.ttl), R_EXPIRES_AT, decimal(expires_at))
end

-- Keeps the end at now (ms) of the holder of semaphore name whose record raw
-- (lib_sem_holder.lua) a release took out of the holders' keys, in the ended
-- set for retried releases and watchers, and tells the watchers (lib_lease.lua
-- mark_released; watched: the mark as read, or nil to look). Returns the
-- grant's time of the lease, for released_reply.
local function holder_released(k, name, raw, now, watched)
  local fence, ttl, granted_at = holder_numbers(raw)
  mark_released(k, 's', name, fence, now, RELEASED_KEPT, ttl, watched)
  return granted_at
end

-- Releases holder lease of semaphore name (raw: its record) beside holders that
-- stay: drops it from the holders' keys and keeps its end (holder_released).
-- Returns the grant's time of the lease, for released_reply.
local function holder_leave(k, name, lease, raw, now, watched)
  redis.call('ZREM', k.h, lease)
  redis.call('HDEL', k.d, lease)
  return holder_released(k, name, raw, now, watched)
end

-- The reply of a release (lib_lease.lua lease_reply) with the grants of
-- handoff: released {granted_at}, the grant's time of the released lease, of
-- which the gateway reckons the hold's length on its own reading of Redis's
-- clock (src/lease/redis_clock.c): decimal text, a number in a record of
-- another layout, or none at all.
local function released_reply(handoff, granted_at)
  if not granted_at then return lease_reply('released', handoff) end
  if type(granted_at) == 'number' then granted_at = decimal(granted_at) end
  return lease_reply('released', handoff, R_GRANTED_AT, granted_at)
end

-- A first holder whose record is of no layout this script reads (a newer
-- gateway's, while gateways are replaced) still holds its slot until the limit
-- key expires: the holder_read fields of a lease nobody's token names, which
-- unfold keeps as it keeps any first holder.
local UNREAD_LEASE = '00000000000000000000000000000000'
local function unread_first_holder(left, now)
  left = decimal(left)
  return {lease = UNREAD_LEASE, fence = '0', owner = '', ttl = left, max_hold = left, granted_at = decimal(now),
          claimed = '1', rid = '', inst = '', attach = ''}
end

-- Moves a first holder kept in the limit key (lib_sem.lua; raw: the limit key as
-- read at now, ms) into the holders' keys: its record (lib_sem_holder.lua) in
-- data, its expiry in holders, the limit alone in the limit key, whose times to
-- live the call's tidy or keep_alive sets (k.fresh). Its expiry is the limit
-- key's, which its renewals move (sem_renew.lua), not the one its record was
-- granted; its request_id goes with its record. Returns the limit key's value
-- as it is now: the limit, or raw when that held no first holder.
local function unfold(k, raw, now)
  local limit, h = first_holder_read(raw)
  if not limit then return raw end
  local left = math.max(redis.call('PTTL', k.l), 0)
  if not h then h = unread_first_holder(left, now) end
  redis.call('HSET', k.d, h.lease, holder_json(h.fence, h.owner, h.ttl, h.max_hold, h.granted_at, h.claimed,
                                               h.rid, h.inst, h.attach))
  set_expiry(k, h.lease, now + left)
  redis.call('SET', k.l, limit)
  k.fresh = true
  return limit
end

-- unfold of the limit key as it is at now (ms).
local function unfold_now(k, now)
  unfold(k, redis.call('GET', k.l), now)
end

-- The time to live (text) that keeps a semaphore's keys keep_ms and a half
-- past a holder lease that ends at last (ms; now when there is none).
local function keys_ttl(now, keep_ms, last)
  return decimal(keep_ms + math.max(0, last - now) + keep_ms / 2)
end

-- Keeps the keys of a semaphore in use alive: they live at least keep_ms after
-- the last holder lease, so an abandoned semaphore does not stay in Redis
-- forever (live waiters call again at least every poll interval, which pushes
-- it on). The six times to live are set half a keep_ms longer than needed, so
-- most calls find them long enough (read from the limit key, set with the
-- others) and set nothing. Long enough means keep_ms past the latest expiry
-- this call set (k.latest, set_expiry): a holder's expiry set by an earlier
-- call was covered then, and its time left and the keys' times to live have
-- run down at the same pace since. A call that may have made one of the keys
-- anew (k.fresh: the first holder or waiter, a new limit) sets them all, since
-- a key made by a write has no time to live. Keys live at most 1.5 x keep_ms
-- after the last holder lease.
local function keep_alive(k, now, keep_ms)
  if not k.fresh and redis.call('PTTL', k.l) >= keep_ms + math.max(0, k.latest - now) then return end
  local last = redis.call('ZRANGE', k.h, '-1', '-1', 'WITHSCORES')
  local ttl = keys_ttl(now, keep_ms, #last > 0 and tonumber(last[2]) or now)
  redis.call('PEXPIRE', k.h, ttl)
  redis.call('PEXPIRE', k.d, ttl)
  redis.call('PEXPIRE', k.q, ttl)
  redis.call('PEXPIRE', k.w, ttl)
  redis.call('PEXPIRE', k.l, ttl)
  redis.call('PEXPIRE', k.t, ttl)
end

-- Takes a free slot of semaphore k for lease beside the holders there are, at
-- now (ms; at: the same as decimal text), where the caller found one and fences
-- left: issues the fence (fence_key), writes the holder's record of ttl and
-- max_hold (decimal text) and tail (lib_sem_holder.lua record_join) and its
-- expiry, and keeps the keys alive. Returns the reply (lib_lease.lua
-- lease_reply): granted {fence, granted_at}.
local function slot_take(k, fence_key, lease, ttl, max_hold, tail, now, at)
  local fence = decimal(redis.call('INCR', fence_key))
  redis.call('HSET', k.d, lease, record_join(fence, ttl, max_hold, at, tail))
  local expires_at = now + ttl
  set_expiry(k, lease, expires_at, decimal(expires_at))
  keep_alive(k, now, SEM_KEEP_MS)
  -- The grant's time, of which the gateway makes its expiry (at + ttl): no sum to print.
  return lease_reply('granted', nil, R_FENCE, fence, R_GRANTED_AT, at)
end
