-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_acquire_fast.lua: the first try of an acquire on lock N: takes the lock
-- when nobody holds it and nobody waits for it, naming only the keys that
-- takes (Redis hands each key and argument of a call to Lua at a price).
-- Anything else it leaves to lock_acquire.lua, which the gateway then runs: it
-- answers "contended" without a write.
-- What it does is what lock_acquire.lua does for the same call on a free lock
-- nobody waits for: never takes a lock somebody is queued for (the tickets
-- exist exactly while the queue does, lib_lock.lua), issues a fence only while
-- the sequence may (lib_lease.lua), keeps the end of the lease before as long
-- as it was to be kept (end_move), and keeps a request_id for as long as its lease
-- (lib_lease.lua rid_take_first). A request_id that still names a lease (a retry)
-- is left to lock_acquire.lua, which answers it with that lease.
-- KEYS: holder tickets fence fence_limit index rid_until rid_one rid_moved
--   those keys of lib_lock.lua and lib_lease.lua, index the locks' listing index, rid_moved
--   the request's own id's key rid_one's value moves to (lib_lease.lua rid_take_first)
--   (the request ids' three come last: a call without a request_id names none of them; the
--   request-id hash is not named, since a first try never maps an id to a lease there)
-- ARGV: name ttl_ms tail request_id
--   tail: the holder record's fields from the lease on (lib_holder.lua holder_join), a fresh
--   lease id: "<lease> <ttl_ms> <max_hold_ms> 1 <instance> <attach> <#rid> <rid><owner>";
--   request_id: "" for none, else the one the tail names
-- Returns (lib_lease.lua lease_reply): granted {fence, granted_at} (the lease and ttl are the
-- gateway's own), contended {}: held, waited for, a holder key this script does not read;
-- nofence {}: no fence may be issued, which says nothing of the name (the gateway has the next
-- block reserved and runs this script again); or repeat {}: a request_id that names a lease (the
-- name is not in use for it).
-- A request_id's look at the keys rid_one and rid_moved joins the first read (lib_lease.lua
-- rid_take_first).
local v = A_request_id == '' and redis.call('MGET', KEYS[3], KEYS[4], KEYS[1], KEYS[2])
          or redis.call('MGET', KEYS[3], KEYS[4], KEYS[1], KEYS[2], KEYS[7], KEYS[8])
local prior = v[3]
if v[4] or (prior and not is_end(prior)) then return lease_reply('contended') end
if not fences_left(v) then return lease_reply('nofence') end
local at = now_text()
if A_request_id ~= ''
   and not rid_take_first(KEYS[6], KEYS[7], v[5], v[6], A_request_id, A_tail,
                          at + A_ttl_ms + REQUEST_ID_GRACE_MS, at + 0) then
  return lease_reply('repeat')
end
if prior then end_move(KEYS[1], prior) end
redis.call('ZADD', KEYS[5], '0', A_name)
local fence = decimal(redis.call('INCR', KEYS[3]))
redis.call('SET', KEYS[1], holder_join(fence, at, A_tail), 'PX', A_ttl_ms)
-- The grant's time, of which the gateway makes its expiry (at + ttl): no sum to print.
return lease_reply('granted', nil, R_FENCE, fence, R_GRANTED_AT, at)
