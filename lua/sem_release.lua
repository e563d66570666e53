-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua lib_sem.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_release.lua: a holder releases its slot of semaphore N; the slot passes
-- to the oldest live waiter in the same step.
-- KEYS: lib_sem.lua moved_end
--   moved_end: the key the end's record of the lease with fence moves to when the idle
--   semaphore is granted again (lib_lease.lua end_move), the last
-- ARGV: name lease fence claim_ms instance
--   fence: the lease's (a retried release looks it up); instance: the
--   gateway's id. A released lease is remembered (for a retried release)
--   LEASE_RELEASED_KEPT_MS, the keys of a semaphore in use live SEM_KEEP_MS
--   past its last lease (src/fglimits.h, as the gateway has them).
-- Returns (lib_lease.lua lease_reply, with the grants handed over, see grant_free): released {held_ms},
-- or released {again} for a repeated release of the same lease, lost {}
-- (the lease expired or was dropped).
local name, lease = A_name, A_lease
local k = sem_keys()
local handoff = {}
local now = now_ms()

purge_count(k, now)
local reply, idle, waits -- reply: the outcome and its facts; idle: nobody holds or waits; waits: somebody does
local ready, limit -- when somebody waits: whether fences may be issued, and the limit key's value
local raw = redis.call('HGET', k.d, lease)
-- A lease in the holders' keys means no first holder waits in the limit key
-- (lib_sem.lua): only a release that finds none there reads that key, and
-- moves such a holder (this lease or another) first.
local limit_raw = not raw and redis.call('GET', k.l)
if limit_raw and unfold(k, limit_raw, now) ~= limit_raw then raw = redis.call('HGET', k.d, lease) end
if raw then
  -- The only holder of a semaphore nobody waits for leaves it idle: its keys
  -- go at once (forget), the lease's with them.
  waits = redis.call('EXISTS', k.q) == 1
  idle = not waits and holders_count(k) == 1
  if not idle then
    local gone = redis.call('ZREM', k.h, lease)
    if k.held then k.held = k.held - gone end
    redis.call('HDEL', k.d, lease)
  end
  local fence, ttl, granted_at = holder_numbers(raw)
  local watched -- the watched mark as read, or nil: mark_ended looks
  if waits then -- the slot goes on: the fence sequence's guard, the limit and the mark in one read
    local v = redis.call('MGET', k.fence, k.fence_limit, k.l, k.watched)
    ready, limit, watched = fences_left(v), v[3], v[4]
  end
  mark_released(k, 's', name, fence, now, RELEASED_KEPT, ttl, watched)
  reply = {'released', R_HELD_MS, decimal(now - (granted_at or now))}
else
  local ended, _, reason = end_read(limit_raw)
  if (ended == lease and reason == 'released') or was_released(k, KEYS[#KEYS], A_fence, now) then
    reply = {'released', R_AGAIN, '1'}
  else
    reply = {'lost'}
  end
end
if idle == nil then idle = redis.call('EXISTS', k.h, k.q) == 0 end
if idle then
  forget(k)
else
  if waits then
    grant_free(k, name, tonumber(limit), A_claim_ms, now, A_instance, handoff, ready)
  elseif waits == nil then
    grant_free(k, name, limit_in_force(k), A_claim_ms, now, A_instance, handoff)
  end -- else nobody waits: there is nobody to grant a slot to
  -- The keys live SEM_KEEP_MS past every holder's expiry but those this call
  -- set (keep_alive): with no grant and no key made anew, they still do.
  if k.fresh or k.latest > 0 then keep_alive(k, now, SEM_KEEP_MS) end
end
index_drop_if_idle(k, name, idle)
return lease_reply(reply[1], handoff, unpack(reply, 2))
