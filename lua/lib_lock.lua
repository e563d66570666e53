-- SPDX-License-Identifier: Apache-2.0
-- lib_lock.lua: functions shared by the lock scripts (prepended to every script
-- whose first line is "-- uses: lib_lock.lua"; never called on its own).
--
-- Key layout of lock N; every key carries the hash tag {N}, base is
-- KEY_LOCK_PREFIX..N..KEY_TAG_END (src/store/keys.h):
-- KEYS: holder queue waiters lib_lease.lua
--   holder   base..KEY_SUFFIX_HOLDERS  hash: lease, fence, owner, ttl, hold_until, granted_at,
--                                      claimed, rid, inst, attach (the gateway and connection
--                                      that asked)
--   queue    base..KEY_SUFFIX_QUEUE    sorted set of waiting lease ids, scored by arrival (the
--                                      last score + 1, so an idle lock leaves no counter behind)
--   waiters  base..KEY_SUFFIX_WAITERS  hash lease id -> JSON {inst, attach, ttl, max_hold, owner,
--                                      rid}
--   then the common lease keys (lib_lease.lua), with KEY_LOCK_INDEX for index.
-- Channel CHANNEL_BELL_PREFIX..id: doorbell of gateway id ("l|<lease>|<name>").

local function lock_keys()
  local k = lease_keys(KEYS_AT_LIB_LEASE)
  k.h, k.q, k.w = KEYS[1], KEYS[2], KEYS[3]
  return k
end

-- Grants the free lock to the oldest waiter whose gateway is alive, dropping
-- waiters of dead gateways on the way (and forgetting their request_id, so that
-- the client's retry through another gateway starts afresh instead of finding a
-- lease that ended without ever being granted). A grant to a waiter of another
-- gateway lasts claim_ms (capped by the waiter's ttl) until that gateway claims
-- it; the doorbell tells it. A grant to a waiter of the calling gateway (inst,
-- when handoff is a table) gets its whole lease at once and is listed in
-- handoff, so the caller wakes that waiter in-process with the grant in hand: no
-- doorbell and no claim round trip. It stays "unclaimed" so that an orphan
-- give-back can still free it.
-- Issues no fence unless the sequence may issue one (lib_lease.lua).
-- Returns the granted lease id, false if nobody waits (any more: the queue is
-- empty), or nil if waiters remain that could not be granted (no fence).
local function grant_next(k, name, claim_ms, now, inst, handoff)
  if not redis.call('ZRANGE', k.q, '0', '0')[1] then return false end -- the uncontended case
  if not fence_ready(k) then return nil end
  local head, w = next_live_waiter(k, now)
  if not head then return false end
  local fence, ttl = decimal(redis.call('INCR', k.fence)), decimal(w.ttl)
  redis.call('HSET', k.h, 'lease', head, 'fence', fence, 'owner', w.owner,
             'ttl', ttl, 'hold_until', decimal(now + w.max_hold), 'granted_at', decimal(now), 'claimed', '0',
             'rid', w.rid, 'inst', w.inst, 'attach', w.attach)
  rid_hold(k, w.rid, head, now + w.ttl, now)
  if handoff and w.inst == inst then
    redis.call('PEXPIRE', k.h, ttl)
    handoff[1] = {lease = head, fence = fence, ttl = ttl, expires_at = decimal(now + w.ttl)}
  else
    redis.call('PEXPIRE', k.h, decimal(math.min(w.ttl, claim_ms)))
    redis.call('PUBLISH', CHANNEL_BELL_PREFIX .. w.inst, 'l|' .. head .. '|' .. name)
  end
  return head
end

-- Starts the full lease of a granted-but-unclaimed holder, on behalf of the
-- connection attach, and keeps its request_id for as long as it holds.
-- Returns the expiry time.
local function claim(k, now, attach)
  local h = redis.call('HMGET', k.h, 'ttl', 'lease', 'rid')
  redis.call('HSET', k.h, 'claimed', '1', 'attach', attach)
  redis.call('PEXPIRE', k.h, tonumber(h[1]))
  rid_hold(k, h[3], h[2], now + tonumber(h[1]), now)
  return now + tonumber(h[1])
end

-- The reply for a lease that holds the lock.
local function granted_reply(k, lease, expires_at)
  local f = redis.call('HMGET', k.h, 'fence', 'ttl')
  return granted_json(lease, f[1], f[2], decimal(expires_at))
end

-- Frees the lock held by lease (whose lease ran for ttl) and hands it on
-- (grant_next, with inst and handoff); fence is the holder's as stored.
-- keep_text is keep_ms as decimal text.
-- Returns what grant_next returns (false: the lock is idle now).
local function release_to_next(k, name, lease, fence, ttl, claim_ms, keep_ms, keep_text, now, inst, handoff)
  redis.call('DEL', k.h)
  mark_released(k, lease, now, keep_ms, ttl)
  mark_ended(k, 'l', name, fence, 'released', keep_text)
  return grant_next(k, name, claim_ms, now, inst, handoff)
end
