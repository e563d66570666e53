-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_acquire_queue.lua: an acquire that waits, on semaphore N whose slots
-- are all held, which the gateway runs before
-- sem_acquire.lua while an earlier call lately found a queue at N
-- (src/lease/contention.h): the caller joins the queue, naming only the keys
-- that touches (Redis hands each key and argument of a call to Lua at a
-- price). It queues only where sem_acquire.lua would queue and do nothing
-- else: the limit in force is the one asked, every slot is held, no holder's
-- lease has run out (sem_acquire.lua purges those first and hands their slots
-- on), the queue is below max_waiters (at it, sem_acquire.lua drops the
-- waiters of dead gateways first) and its request_id, if any, names no lease
-- (a retry, which takes the place of the attempt before over). A slot free
-- with nobody waiting it takes as sem_acquire_more.lua would (below). Anything
-- else it leaves to sem_acquire.lua, which the gateway then runs: it answers
-- "contended" without a write.
-- What it does is what sem_acquire.lua does for the same call: takes the next
-- arrival ticket, writes the waiter's record, marks the gateway alive in the
-- semaphore's slot on a Redis Cluster (lib_lease.lua gateway_mark), keeps the
-- keys alive (lib_sem_life.lua keep_alive) and the request_id until its wait
-- and lease could have ended (lib_lease.lua rid_join). The name is in the
-- listing index already: a holder is there.
-- KEYS: holders data queue waiters limit tickets fence fence_limit gateways rids rid_until rid_one rid_moved
--   those keys of lib_sem.lua and lib_lease.lua, rid_moved the request's own id's key a first
--   try moves rid_one's value to (lib_lease.lua rid_take_first)
--   (the request ids' four come last: a call without a request_id names none of them)
-- ARGV: lease limit max_waiters instance mark_ms record request_id request_id_ttl_ms
--   lease: a fresh lease id; instance, mark_ms, request_id, request_id_ttl_ms: as sem_acquire.lua has
--   them; record: the waiter's record (lib_lease.lua waiter_json) up to its "since" value, which the
--   script appends with the closing brace: '{"inst":"<instance>",...,"since":'
-- Returns (lib_lease.lua lease_reply): queued {lease, position, holder_pttl}, granted {fence, granted_at}
-- (a free slot, below), contended {}, or repeat {}: a request_id that names a lease.
local limit = A_limit + 0
-- A request_id's look at the keys rid_one and rid_moved joins the first read (lib_lease.lua rid_join).
local v = A_request_id == '' and redis.call('MGET', KEYS[5]) or redis.call('MGET', KEYS[5], KEYS[12], KEYS[13])
if v[1] ~= A_limit then return lease_reply('contended') end
local held = redis.call('ZCARD', KEYS[1])
if held < limit then
  -- A slot free: taken as sem_acquire_more.lua takes one beside the holders there are (a holder is there,
  -- fences are left, nobody waits, none ran out, the request_id names no lease), a claimed grant of the ttl,
  -- hold and owner of the waiter record the gateway handed over (read off its text where the gateway writes
  -- them, as sem_release_handover.lua reads a waiter's); else left to sem_acquire.lua. The queue of a
  -- semaphore in use empties now and then, and an acquire that finds a slot free then costs one call.
  if held == 0 or not fences_left(redis.call('MGET', KEYS[7], KEYS[8])) then return lease_reply('contended') end
  local queued, rid_set_exists = queue_busy_look(KEYS[11], KEYS[3], A_request_id, v[2])
  if queued then return lease_reply('contended') end
  local now, at = now_ms_and_text()
  if redis.call('ZCOUNT', KEYS[1], '-inf', at) > 0 then return lease_reply('contended') end
  local ttl, max_hold, owner_at = string.match(A_record, '^","ttl":"(%d+)","max_hold":"(%d+)","owner":()', 86)
  local rid_at = owner_at and string.find(A_record, ',"rid":', owner_at, true)
  if not rid_at then return lease_reply('contended') end
  if A_request_id ~= ''
     and not rid_take(KEYS[10], KEYS[11], KEYS[12], v[2], v[3], A_request_id, A_lease,
                      now + ttl + REQUEST_ID_GRACE_MS, now, rid_set_exists) then
    return lease_reply('repeat')
  end
  local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], w = KEYS[4], l = KEYS[5], t = KEYS[6], fresh = false,
             latest = 0, first = false, held = false}
  -- The record's ',"rid":<request_id>' up to its ',"since":', the two ids at their places, the owner.
  local tail = ',"claimed":1' .. string.sub(A_record, rid_at, -10) .. ',"inst":"' .. string.sub(A_record, 10, 41) ..
               '","attach":"' .. string.sub(A_record, 54, 85) .. '","owner":' ..
               string.sub(A_record, owner_at, rid_at - 1) .. '}'
  return slot_take(k, KEYS[7], A_lease, ttl, max_hold, tail, now, at)
end

local now, at = now_ms_and_text()
local first = tonumber(redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')[2])
local waiting = redis.call('ZCARD', KEYS[3])
if first <= now or waiting >= A_max_waiters + 0 then return lease_reply('contended') end
if A_request_id ~= ''
   and not rid_join(KEYS[10], KEYS[11], v[2], v[3], A_request_id, A_lease, now + A_request_id_ttl_ms, now) then
  return lease_reply('repeat')
end
-- fresh: the first waiter makes the queue's keys anew (keep_alive sets every time to live then)
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], w = KEYS[4], l = KEYS[5], t = KEYS[6], gateways = KEYS[9],
           fresh = waiting == 0, latest = 0}
redis.call('ZADD', k.q, decimal(redis.call('INCR', k.t)), A_lease)
gateway_mark(k, A_instance, A_mark_ms, now)
redis.call('HSET', k.w, A_lease, A_record .. at .. '}')
keep_alive(k, now, SEM_KEEP_MS)
return lease_reply('queued', nil, R_LEASE, A_lease, R_POSITION, decimal(waiting), R_HOLDER_PTTL,
                   decimal(first - now))
