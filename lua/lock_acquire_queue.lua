-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_acquire_queue.lua: an acquire that waits, on lock N held by a live
-- lease, which the gateway runs before lock_acquire.lua while
-- an earlier call lately found N held or queued for (src/lease/contention.h):
-- the caller joins the queue, naming only the keys that touches (Redis hands
-- each key and argument of a call to Lua at a price). It queues only where
-- lock_acquire.lua would queue and do nothing else: a lease holds the lock,
-- its record one this script reads (the key expires with the lease; a record
-- of another layout, a newer gateway's, looks idle to a listing, and
-- lock_acquire.lua puts the name back in the index for its first waiter), and
-- the queue is below max_waiters (at it, lock_acquire.lua drops the waiters of
-- dead gateways first), and its request_id, if any, names no lease (a retry,
-- which takes the place of the attempt before over). Anything else it leaves
-- to lock_acquire.lua, which the gateway then runs: it answers "contended"
-- without a write. It issues no fence, so it need not look at the fence
-- sequence.
-- What it does is what lock_acquire.lua does for the same call: takes the next
-- arrival ticket, writes the waiter's record, marks the gateway alive in the
-- lock's slot on a Redis Cluster (lib_lease.lua gateway_mark), keeps the
-- queue's keys until the waiter's deadline has passed (lib_lease.lua
-- queue_keep) and the request_id until its wait and lease could have ended
-- (lib_lease.lua rid_join). The name is in the listing index already: a
-- holder is there.
-- KEYS: holder queue waiters tickets gateways rids rid_until rid_one rid_moved
--   those keys of lib_lock.lua and lib_lease.lua, rid_moved the request's own id's key a first
--   try moves rid_one's value to (lib_lease.lua rid_take_first)
--   (the request ids' four come last: a call without a request_id names none of them)
-- ARGV: lease max_waiters instance mark_ms record queue_ms queue_keep_ms request_id request_id_ttl_ms
--   lease: a fresh lease id; instance, mark_ms, queue_ms, queue_keep_ms, request_id, request_id_ttl_ms:
--   as lock_acquire.lua has them; record: the waiter's record (lib_lease.lua waiter_json) up to its
--   "since" value, which the script appends with the closing brace: '{"inst":"<instance>",...,"since":'
-- Returns (lib_lease.lua lease_reply): queued {lease, position, holder_pttl}, contended {}, or
-- repeat {}: a request_id that names a lease.
-- A request_id's look at the keys rid_one and rid_moved joins the first read (lib_lease.lua rid_join).
local v = A_request_id == '' and redis.call('MGET', KEYS[1]) or redis.call('MGET', KEYS[1], KEYS[8], KEYS[9])
if not holder_readable(v[1]) then return lease_reply('contended') end
local waiting = redis.call('ZCARD', KEYS[2])
if waiting >= A_max_waiters + 0 then return lease_reply('contended') end
local now, at = now_ms_and_text()
if A_request_id ~= ''
   and not rid_join(KEYS[6], KEYS[7], v[2], v[3], A_request_id, A_lease, now + A_request_id_ttl_ms, now) then
  return lease_reply('repeat')
end
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[4]), A_lease)
gateway_mark({gateways = KEYS[5]}, A_instance, A_mark_ms, now)
redis.call('HSET', KEYS[3], A_lease, A_record .. at .. '}')
queue_keep(KEYS[2], KEYS[3], KEYS[4], A_queue_ms, A_queue_keep_ms, waiting == 0)
return lease_reply('queued', nil, R_LEASE, A_lease, R_POSITION, decimal(waiting), R_HOLDER_PTTL,
                   decimal(redis.call('PTTL', KEYS[1])))
