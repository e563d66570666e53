-- SPDX-License-Identifier: Apache-2.0
-- lib_sem.lua: functions shared by the semaphore scripts (prepended to every
-- script whose first line is "-- uses: lib_lease.lua lib_holder.lua
-- lib_sem_holder.lua lib_sem_life.lua lib_sem.lua"; never called on its own).
--
-- Key layout of semaphore N; every key carries the hash tag {N}, base is
-- KEY_SEM_PREFIX..N..KEY_TAG_END (src/store/backend/redis_keys.h):
-- KEYS: holders data queue waiters limit tickets lib_lease.lua
--   holders  base..KEY_SUFFIX_HOLDERS      sorted set of lease ids scored by lease expiry (Redis
--                                          time, ms); an unclaimed grant by its claim window
--   data     base..KEY_SUFFIX_HOLDER_DATA  hash lease id -> the holder's record (lib_sem_holder.lua)
--   queue    base..KEY_SUFFIX_QUEUE        sorted set of waiting lease ids, by arrival ticket
--   waiters  base..KEY_SUFFIX_WAITERS      hash lease id -> JSON {inst, attach, ttl, max_hold,
--                                          owner, rid, since}; since: ms (Redis TIME) it joined
--                                          the queue
--   limit    base..KEY_SUFFIX_LIMIT        the limit in force while there are holders or waiters;
--                                          once idle, maybe the end of the last lease (lib_lease.lua
--                                          end_text); or the first holder with the limit, while
--                                          nothing else is in use (below)
--   tickets  base..KEY_SUFFIX_TICKETS      arrival ticket counter
--   then the common lease keys (lib_lease.lua), with KEY_SEM_INDEX for index.
-- Channel CHANNEL_BELL_PREFIX..id: doorbell of gateway id ("s|<lease>|<name>": a grant; "w|<lease>|<name>":
-- only a wake-up, lib_lock.lua; on a cluster its shard channel of the semaphore's slot, lib_lease.lua publish).
--
-- Every script here that finds the semaphore in use starts by purging expired
-- holders, then hands the slots that frees to the oldest live waiters, so a
-- crashed holder's slot is reused within one lease by whoever acquires,
-- releases, gives up or revokes; the first waiters also look again themselves
-- when the earliest holder's lease ends (src/lease/lease_wait.c). A renewal
-- (sem_renew.lua) touches its own holder alone, and leaves that to them. An
-- acquire of an idle semaphore (no limit, holder or waiter) takes the first
-- slot with none of that, and the release of
-- its only holder with nobody waiting drops its keys and writes the end's
-- record over the limit: an uncontended pair touches neither queue nor
-- history.
--
-- The first try of an acquire (sem_acquire_fast.lua) keeps the first holder
-- of an idle semaphore as a lock keeps its holder, in one string key that
-- expires with the lease: the limit key, "=<limit> <holder record>"
-- (lib_holder.lua first_holder_join; the try beside other holders,
-- sem_acquire_more.lua, does the same, lib_sem_first.lua); no other key of the
-- semaphore exists then, and the lean tries of a release end it there, as its
-- renewal renews it there (the limit key's time to live is its expiry,
-- sem_renew.lua). Every
-- other script that changes the semaphore first moves that holder into the
-- holders' keys (unfold), so the rest of this file never meets it; the reads
-- (sem_status.lua, sem_watch.lua, lease_list.lua) read it where it is.

local function sem_keys()
  -- One table constructor for the semaphore's keys, the common ones of
  -- lib_lease.lua and the call's bookkeeping: a table filled in later, key by
  -- key, grows and rehashes on the way, which costs a script more than some of
  -- its commands. fresh: a key may have been made without a time to live;
  -- latest: the latest holder expiry this call set (both for keep_alive);
  -- first: the earliest holder expiry, as far as this call knows it
  -- (purge_count; false: unknown, -1: no holder); held: the number of holders
  -- purge_count left, until one comes or goes (false: unknown).
  local f = KEYS_AT_LIB_LEASE
  return {h = KEYS[1], d = KEYS[2], q = KEYS[3], w = KEYS[4], l = KEYS[5], t = KEYS[6], fresh = false, latest = 0,
          first = false, held = false,
          fence = KEYS[f], fence_limit = KEYS[f + 1], gateways = KEYS[f + 2], rids = KEYS[f + 3],
          rid_until = KEYS[f + 4], index = KEYS[f + 5], ended = KEYS[f + 6], revoked = KEYS[f + 7],
          watched = KEYS[f + 8], rid_one = KEYS[f + 9]}
end

-- Removes the holders whose lease expired (score <= now); returns how many.
local function purge(k, now)
  local now_text = decimal(now)
  local dead = redis.call('ZRANGEBYSCORE', k.h, '-inf', now_text)
  if #dead == 0 then return 0 end
  redis.call('ZREMRANGEBYSCORE', k.h, '-inf', now_text)
  for i = 1, #dead, 500 do
    redis.call('HDEL', k.d, unpack(dead, i, math.min(i + 499, #dead)))
  end
  return #dead
end

-- purge, for a caller that counts the holders (holders_count) and may answer
-- the earliest holder expiry (first_expiry_in): a count, then one look that
-- tells whether any expired, and both are kept (k.held, k.first) when none
-- did. The look is a count of the expired, unless the slots are all taken
-- (limit: the limit, or nil), when the caller is likely to queue: then it is
-- the earliest expiry, which a waiter is answered. (An expiry Redis replies
-- is a number printed, and read back in Lua: that costs more than the count
-- itself.) set_expiry keeps k.first up to date as holders come, and an expiry
-- moved later (claim) leaves it earlier than it is: a waiter then looks again
-- sooner than it had to, never later.
local function purge_count(k, now, limit)
  local held = redis.call('ZCARD', k.h)
  if held == 0 then
    k.first, k.held = -1, 0
    return
  end
  local expired
  if limit and held >= limit then
    k.first = tonumber(redis.call('ZRANGE', k.h, '0', '0', 'WITHSCORES')[2])
    expired = k.first <= now
  else
    expired = redis.call('ZCOUNT', k.h, '-inf', decimal(now)) > 0
  end
  if expired then
    k.first = false
    held = held - purge(k, now)
  end
  k.held = held
end

-- The number of holders: purge_count's while it holds, else a count.
local function holders_count(k)
  return k.held or redis.call('ZCARD', k.h)
end

-- Grants free slots (limit minus holders) to the oldest waiters whose gateway
-- is alive, dropping waiters of dead gateways on the way. A grant to a waiter
-- of another gateway lasts claim_ms (capped by the waiter's ttl) until that
-- gateway claims it; the doorbell tells it. A grant to a waiter of the calling
-- gateway (inst) gets its whole lease at once and is listed in handoff (at most
-- LEASE_MAX_HANDOFF of src/fglimits.h), so the caller wakes that waiter in-process with the grant in
-- hand: no doorbell and no claim round trip. It stays "unclaimed" so that an
-- orphan give-back can still free it. Issues no fence unless the sequence may
-- issue one (lib_lease.lua). ready: nil, or for a caller that knows somebody
-- waits, whether fences may be issued (lib_lease.lua fence_ready_and_get).
-- claim_ms is decimal text, read only for a grant to another gateway's waiter.
-- Sets k.granted once it granted a slot. Returns, when it granted nothing, the
-- waiters it counted (nil when it did not count them), so that the caller need
-- not count again.
local function grant_free(k, name, limit, claim_ms, now, inst, handoff, ready)
  if not limit then return end
  local held = holders_count(k)
  local free = limit - held
  if free <= 0 then return end -- no slot
  local waiting
  if ready == nil then
    waiting = redis.call('ZCARD', k.q)
    if waiting == 0 then return 0 end -- nobody waits
    ready = fence_ready(k)
  end
  if not ready then return waiting end
  if held == 0 then k.fresh = true end
  while free > 0 do
    local head, w = next_live_waiter(k, now, inst)
    if not head then return end
    local fence, ttl = decimal(redis.call('INCR', k.fence)), w.ttl
    local ttl_ms = tonumber(ttl)
    local here = w.inst == inst and #handoff < LEASE_MAX_HANDOFF
    local expires_at = now + (here and ttl_ms or math.min(ttl_ms, tonumber(claim_ms)))
    local expires_text = decimal(expires_at)
    set_expiry(k, head, expires_at, expires_text)
    redis.call('HSET', k.d, head, holder_json(fence, w.owner, ttl, w.max_hold, decimal(now), '0',
                                              w.rid, w.inst, w.attach))
    rid_extend_set(k, w.rid, now + ttl_ms)
    if here then
      handoff[#handoff + 1] = {lease = head, fence = fence, ttl = ttl, expires_at = expires_text}
    else
      publish(CHANNEL_BELL_PREFIX .. w.inst, 's|' .. head .. '|' .. name)
    end
    free = free - 1
    k.granted = true
  end
end

-- The limit in force, or nil.
local function limit_in_force(k)
  return tonumber(redis.call('GET', k.l))
end

-- The holder record of lease, or nil.
local function holder_of(k, lease)
  local raw = redis.call('HGET', k.d, lease)
  if raw then return cjson.decode(raw) end
  return nil
end

-- Milliseconds until the earliest holder lease ends (a slot may free then), or -1.
local function first_expiry_in(k, now)
  local at = k.first
  if not at then
    local first = redis.call('ZRANGE', k.h, '0', '0', 'WITHSCORES')
    at = #first > 0 and tonumber(first[2]) or -1
  end
  if at == -1 then return -1 end
  return math.max(0, at - now)
end

-- Removes every key of an idle semaphore (no holder, no waiter), but for an
-- end's record in the limit key (sem_release.lua), which is kept for retried
-- releases and watchers until it runs out.
local function forget(k)
  redis.call('DEL', k.h, k.d, k.q, k.w, k.t)
  local l = redis.call('GET', k.l)
  if l and not is_end(l) then redis.call('DEL', k.l) end
end

-- Ends the scripts' bookkeeping: a semaphore with neither holders nor waiters
-- forgets its keys, limit included; otherwise keep_alive. Returns true if the
-- semaphore is idle (its keys are gone).
local function tidy(k, now, keep_ms)
  if redis.call('EXISTS', k.h, k.q) == 0 then
    forget(k)
    return true
  end
  keep_alive(k, now, keep_ms)
  return false
end

-- The bookkeeping of the first grant of an idle semaphore, whose only keys are
-- now the holders and their data: sets the limit over prior (the limit key as
-- read: nothing, or the end's record of the last lease, which goes to the
-- history first) and, as keep_alive would, the three keys' times to live past
-- that holder's lease (k.latest).
local function settle_first_holder(k, now, keep_ms, limit_text, prior)
  local ttl = keys_ttl(now, keep_ms, k.latest)
  end_bury(k, k.l, prior, now)
  redis.call('SET', k.l, limit_text, 'PX', ttl)
  redis.call('PEXPIRE', k.h, ttl)
  redis.call('PEXPIRE', k.d, ttl)
end
