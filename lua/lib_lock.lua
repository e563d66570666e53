-- SPDX-License-Identifier: Apache-2.0
-- lib_lock.lua: functions shared by the lock scripts (prepended to every script
-- whose first line is "-- uses: lib_lease.lua lib_holder.lua lib_lock.lua";
-- never called on its own).
--
-- Key layout of lock N; every key carries the hash tag {N}, base is
-- KEY_LOCK_PREFIX..N..KEY_TAG_END (src/store/backend/redis_keys.h):
-- KEYS: holder queue waiters tickets lib_lease.lua
--   holder   base..KEY_SUFFIX_HOLDERS  string: the holder record (lib_holder.lua), which expires
--                                      with the lease, or the end of the last lease (lib_lease.lua
--                                      end_text)
--   queue    base..KEY_SUFFIX_QUEUE    sorted set of waiting lease ids, scored by arrival ticket
--   waiters  base..KEY_SUFFIX_WAITERS  hash lease id -> JSON {inst, attach, ttl, max_hold, owner,
--                                      rid, since}; since: ms (Redis TIME) it joined the queue
--   tickets  base..KEY_SUFFIX_TICKETS  the last arrival ticket; exists exactly while the queue does
--                                      (so an idle lock leaves no counter behind), and so tells, in the
--                                      MGET that reads the holder, whether anybody waits
--   then the common lease keys (lib_lease.lua), with KEY_LOCK_INDEX for index.
-- Channel CHANNEL_BELL_PREFIX..id: doorbell of gateway id ("l|<lease>|<name>": a grant to a waiter there;
-- "w|<lease>|<name>": only a wake-up, no grant, never given back as an orphan; on a cluster its shard
-- channel of the lock's slot, lib_lease.lua publish).
--
-- What an uncontended acquire and release cost: the acquire reads the fence
-- sequence, the holder and the tickets in one MGET, then TIME, the index, INCR
-- and one SET; the release reads holder, watched mark and tickets in one MGET,
-- then TIME, one SET (the end's record over the holder) and the index. The
-- queue, the history of ended leases and the request ids are touched only when
-- there is something in them or to put in them.

-- Where the keys an uncontended acquire or release touches are in KEYS: those
-- paths read KEYS directly, since building lock_keys() costs a call more than
-- one of its commands.
local AT_HOLDER, AT_TICKETS, AT_FENCE, AT_FENCE_LIMIT = 1, 4, KEYS_AT_LIB_LEASE, KEYS_AT_LIB_LEASE + 1
local AT_INDEX, AT_WATCHED = KEYS_AT_LIB_LEASE + 5, KEYS_AT_LIB_LEASE + 8

local function lock_keys()
  local f = KEYS_AT_LIB_LEASE
  return {h = KEYS[1], q = KEYS[2], w = KEYS[3], t = KEYS[4],
          fence = KEYS[f], fence_limit = KEYS[f + 1], gateways = KEYS[f + 2], rids = KEYS[f + 3],
          rid_until = KEYS[f + 4], index = KEYS[f + 5], ended = KEYS[f + 6], revoked = KEYS[f + 7],
          watched = KEYS[f + 8], rid_one = KEYS[f + 9]}
end

-- Writes the live holder record text for lease (ms as decimal text), copying
-- the end's record it replaces (prior: the holder key's value as read, or
-- false) into the history first.
local function holder_write(k, prior, text, ms, now)
  end_bury(k, k.h, prior, now)
  redis.call('SET', k.h, text, 'PX', ms)
end

-- Called after waiters left the queue: the tickets go with the last one.
local function queue_settled(k)
  if redis.call('EXISTS', k.q) == 0 then redis.call('DEL', k.t) end
end

-- Grants the free lock to the oldest waiter whose gateway is alive (the calling
-- gateway inst is, without a look at its mark), dropping waiters of dead
-- gateways on the way (and forgetting their request_id, so that
-- the client's retry through another gateway starts afresh instead of finding a
-- lease that ended without ever being granted). A grant to a waiter of another
-- gateway lasts claim_ms (capped by the waiter's ttl) until that gateway claims
-- it; the doorbell tells it. A grant to a waiter of the calling gateway (inst,
-- when handoff is a table) gets its whole lease at once and is listed in
-- handoff, so the caller wakes that waiter in-process with the grant in hand: no
-- doorbell and no claim round trip. It stays "unclaimed" so that an orphan
-- give-back can still free it. prior: the holder key's value as read (an end's
-- record, or false), which holder_write keeps in the history.
-- Issues no fence unless the sequence may issue one (lib_lease.lua; ready: what
-- fences_left answered on the caller's own read, nil to read it here).
-- Returns the granted lease id, false if nobody waits (any more: the queue is
-- empty), or nil if waiters remain that could not be granted (no fence).
local function grant_next(k, name, claim_ms, now, inst, handoff, prior, ready)
  if ready == nil then ready = fence_ready(k) end
  if not ready then
    if redis.call('EXISTS', k.q) == 1 then return nil end
    redis.call('DEL', k.t)
    return false
  end
  local head, w = next_live_waiter(k, now, inst)
  queue_settled(k)
  if not head then return false end
  local fence, ttl = decimal(redis.call('INCR', k.fence)), w.ttl
  local ttl_ms = tonumber(ttl)
  local here = handoff and w.inst == inst
  local text = holder_text(head, fence, ttl, w.max_hold, decimal(now), '0', w.inst, w.attach, w.rid, w.owner)
  holder_write(k, prior, text, here and ttl or decimal(math.min(ttl_ms, claim_ms)), now)
  rid_extend_set(k, w.rid, now + ttl_ms)
  if here then
    handoff[1] = {lease = head, fence = fence, ttl = ttl, expires_at = decimal(now + ttl_ms)}
  else
    publish(CHANNEL_BELL_PREFIX .. w.inst, 'l|' .. head .. '|' .. name)
  end
  return head
end

-- What a release, a revoke or a give-up reads first, in one MGET: {fence, fence
-- limit, holder, watched mark, tickets} (the fence sequence as lib_lease.lua
-- fences_left reads it, then what end_and_pass needs).
local function lock_end_read()
  return redis.call('MGET', KEYS[AT_FENCE], KEYS[AT_FENCE_LIMIT], KEYS[AT_HOLDER], KEYS[AT_WATCHED],
                    KEYS[AT_TICKETS])
end

-- Ends the lease of holder h (holder_read) for reason (released, revoked) and
-- hands the lock on (grant_next, with inst and handoff) when anybody may wait
-- (v: lock_end_read's values). keep_text: how long the end is kept (ms,
-- decimal text). The end's record goes over the holder (as lib_lease.lua
-- holder_end writes it) only when nobody is granted: with a grant, the end
-- goes to the history and the new holder's record over the holder.
-- Returns what grant_next returns (false: the lock is idle now).
local function end_and_pass(k, name, h, reason, claim_ms, keep_text, now, inst, handoff, v)
  local text, keep = holder_end_text(h, reason, keep_text)
  if v[4] then publish_end('l', name, h.fence, reason) end
  local granted = v[5] and grant_next(k, name, claim_ms, now, inst, handoff, false, fences_left(v))
  if granted then
    end_keep(k, h.fence, reason, now, now + keep)
  else
    redis.call('SET', k.h, text, 'PX', keep)
  end
  return granted
end
