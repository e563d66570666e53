-- uses: lib_lease.lua lib_holder.lua lib_sem_first.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_acquire_fast.lua: the first try of an acquire on semaphore N: takes
-- the first slot of an idle semaphore (no limit in force, no holder, no
-- waiter), naming only the keys that takes (Redis hands each key and argument
-- of a call to Lua at a price). Anything else it leaves to sem_acquire.lua,
-- which the gateway then runs: it answers "contended" without a write. The
-- first holder is kept as a lock's is, in one string key: the limit key, with
-- the limit (lib_holder.lua first_holder_join), which expires with the lease;
-- the first call that finds the semaphore so and needs more (another acquire,
-- a renew, a revoke...) moves it into the holders' keys first (lib_sem.lua
-- unfold). Like sem_acquire.lua on an idle semaphore it issues a fence only
-- while the sequence may (lib_lease.lua), keeps the end of the lease before as
-- long as it was to be kept (end_move), and keeps a request_id for as long as its lease
-- (lib_lease.lua rid_take_first). A request_id that still names a lease (a retry)
-- is left to sem_acquire.lua, which answers it with that lease.
-- KEYS: limit holders queue fence fence_limit index rid_until rid_one rid_moved
--   those keys of lib_sem.lua and lib_lease.lua, index the semaphores' listing index, rid_moved
--   the request's own id's key rid_one's value moves to (lib_lease.lua rid_take_first)
--   (the request ids' three come last: a call without a request_id names none of them; the
--   request-id hash is not named, since a first try never maps an id to a lease there)
-- ARGV: name ttl_ms limit tail request_id
--   tail: the holder record's fields from the lease on (lib_holder.lua holder_join), a fresh
--   lease id: "<lease> <ttl_ms> <max_hold_ms> 1 <instance> <attach> <#rid> <rid><owner>";
--   request_id: "" for none, else the one the tail names
-- Returns (lib_lease.lua lease_reply): granted {fence, granted_at} (the lease and ttl are the
-- gateway's own), contended {}: in use, a limit key this script does not read; nofence {}: no
-- fence may be issued, which says nothing of the name (the gateway has the next block reserved
-- and runs this script again); or repeat {}: a request_id that names a lease (the name is not in
-- use for it).
-- A request_id's look at the keys rid_one and rid_moved joins the first read, and its look at
-- whether the request-id set exists the EXISTS of the holders and the queue (lib_lease.lua
-- rid_busy_look).
local v = A_request_id == '' and redis.call('MGET', KEYS[4], KEYS[5], KEYS[1])
          or redis.call('MGET', KEYS[4], KEYS[5], KEYS[1], KEYS[8], KEYS[9])
local prior = v[3]
if prior and not is_end(prior) then return lease_reply('contended') end
if not fences_left(v) then return lease_reply('nofence') end
return first_slot_take(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7], KEYS[8], v, A_name, A_limit,
                       A_ttl_ms, A_tail, A_request_id)
