-- SPDX-License-Identifier: Apache-2.0
-- lib_sem_first.lua: a semaphore's first holder kept in its limit key
-- (lib_sem.lua), taken on an idle semaphore and released there, as the lean
-- scripts do it: the first tries (sem_acquire_fast.lua, sem_release_fast.lua)
-- and the tries beside other holders (sem_acquire_more.lua,
-- sem_release_more.lua), which meet such a semaphore too while a name goes
-- idle and back (prepended after lib_lease.lua and lib_holder.lua; never
-- called on its own). It reads no KEYS itself: the caller names each key.

-- Takes the first slot of an idle semaphore name (no limit in force, no holder, no waiter) for a
-- lease of ttl (ms, decimal text), its holder record kept with limit in the limit key (first_holder_join,
-- tail as there), where neither the holders' key nor the queue exists; v is the caller's MGET of the fence
-- sequence, its limit and the limit key (then rid_one's and rid_moved's values where rid is not ''), the
-- fence sequence known to have fences left. Like sem_acquire.lua on an idle semaphore it keeps the end of
-- the lease before as long as it was to be kept (end_move) and a request_id for as long as its lease
-- (lib_lease.lua rid_take_first); a request_id that still names a lease (a retry) is left to sem_acquire.lua,
-- which answers it with that lease. Returns the reply (lib_lease.lua lease_reply): granted {fence,
-- granted_at}, contended {} (holders or a queue) or repeat {} (that retry).
local function first_slot_take(limit_key, holders, queue, fence_key, index, rid_until, rid_one, v, name, limit,
                               ttl, tail, rid)
  local busy, rid_set_exists
  if rid ~= '' then
    busy, rid_set_exists = rid_busy_look(rid_until, holders, queue)
  else
    busy = redis.call('EXISTS', holders, queue) ~= 0
  end
  if busy then return lease_reply('contended') end
  local at = now_text()
  if rid ~= '' and not rid_take_first(rid_until, rid_one, v[4], v[5], rid, tail, at + ttl + REQUEST_ID_GRACE_MS,
                                      at + 0, rid_set_exists) then
    return lease_reply('repeat')
  end
  if v[3] then end_move(limit_key, v[3]) end
  redis.call('ZADD', index, '0', name)
  local fence = decimal(redis.call('INCR', fence_key))
  redis.call('SET', limit_key, first_holder_join(limit, fence, at, tail), 'PX', ttl)
  -- The grant's time, of which the gateway makes its expiry (at + ttl): no sum to print.
  return lease_reply('granted', nil, R_FENCE, fence, R_GRANTED_AT, at)
end

-- Releases lease, if it is the first holder of semaphore name kept in the limit key: nobody waits then (a
-- call that queues moves the holder out of that key first, lib_sem_life.lua unfold), so the semaphore is
-- idle: the end's record of the lease takes the limit key's place, and the name leaves the listing index.
-- v is the caller's MGET of the limit key and the watched mark. Returns the reply (lib_lease.lua
-- lease_reply): released {granted_at}, or nil where lease is no such holder.
local function first_holder_release(limit_key, index, v, name, lease)
  local h = holder_brief(v[1], FIRST_HOLDER_BRIEF)
  if not h or h.lease ~= lease then return nil end
  holder_end('s', limit_key, name, h, 'released', RELEASED_KEPT, v[2])
  redis.call('ZREM', index, name)
  -- The grant's time: the gateway reckons the hold's length on its own reading of Redis's clock
  -- (src/lease/redis_clock.c), so the release asks Redis no time.
  return lease_reply('released', nil, R_GRANTED_AT, h.granted_at)
end
