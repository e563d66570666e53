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
-- (a retry, which takes the place of the attempt before over). Anything else
-- it leaves to sem_acquire.lua, which the gateway then runs: it answers
-- "contended" without a write. It issues no fence, so it need not look at the
-- fence sequence.
-- What it does is what sem_acquire.lua does for the same call: takes the next
-- arrival ticket, writes the waiter's record, marks the gateway alive in the
-- semaphore's slot on a Redis Cluster (lib_lease.lua gateway_mark), keeps the
-- keys alive (lib_sem_life.lua keep_alive) and the request_id until its wait
-- and lease could have ended (lib_lease.lua rid_join). The name is in the
-- listing index already: a holder is there.
-- KEYS: holders data queue waiters limit tickets gateways rids rid_until rid_one rid_moved
--   those keys of lib_sem.lua and lib_lease.lua, rid_moved the request's own id's key a first
--   try moves rid_one's value to (lib_lease.lua rid_take_first)
--   (the request ids' four come last: a call without a request_id names none of them)
-- ARGV: lease limit max_waiters instance mark_ms record request_id request_id_ttl_ms
--   lease: a fresh lease id; instance, mark_ms, request_id, request_id_ttl_ms: as sem_acquire.lua has
--   them; record: the waiter's record (lib_lease.lua waiter_json) up to its "since" value, which the
--   script appends with the closing brace: '{"inst":"<instance>",...,"since":'
-- Returns (lib_lease.lua lease_reply): queued {lease, position, holder_pttl}, contended {}, or
-- repeat {}: a request_id that names a lease.
local limit = A_limit + 0
-- A request_id's look at the keys rid_one and rid_moved joins the first read (lib_lease.lua rid_join).
local v = A_request_id == '' and redis.call('MGET', KEYS[5]) or redis.call('MGET', KEYS[5], KEYS[10], KEYS[11])
if v[1] ~= A_limit or redis.call('ZCARD', KEYS[1]) < limit then
  return lease_reply('contended')
end
local now, at = now_ms_and_text()
local first = tonumber(redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')[2])
local waiting = redis.call('ZCARD', KEYS[3])
if first <= now or waiting >= A_max_waiters + 0 then return lease_reply('contended') end
if A_request_id ~= ''
   and not rid_join(KEYS[8], KEYS[9], v[2], v[3], A_request_id, A_lease, now + A_request_id_ttl_ms, now) then
  return lease_reply('repeat')
end
-- fresh: the first waiter makes the queue's keys anew (keep_alive sets every time to live then)
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], w = KEYS[4], l = KEYS[5], t = KEYS[6], gateways = KEYS[7],
           fresh = waiting == 0, latest = 0}
redis.call('ZADD', k.q, decimal(redis.call('INCR', k.t)), A_lease)
gateway_mark(k, A_instance, A_mark_ms, now)
redis.call('HSET', k.w, A_lease, A_record .. at .. '}')
keep_alive(k, now, SEM_KEEP_MS)
return lease_reply('queued', nil, R_LEASE, A_lease, R_POSITION, decimal(waiting), R_HOLDER_PTTL,
                   decimal(first - now))
