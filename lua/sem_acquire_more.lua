-- uses: lib_lease.lua lib_holder.lua lib_sem_first.lua lib_sem_holder.lua lib_sem_life.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_acquire_more.lua: an acquire on semaphore N in use, which the gateway
-- runs before sem_acquire.lua while its first try
-- (sem_acquire_fast.lua) lately found N in use (src/lease/contention.h):
-- takes a slot beside the holders there are, naming only the keys that
-- touches (Redis hands each key and argument of a call to Lua at a price).
-- It takes one only when the limit in force is the one asked, a holder is
-- there and a slot is free, no holder's lease has run out (sem_acquire.lua
-- purges those first, and may hand their slots to waiters), nobody waits, and
-- its request_id, if any, names no lease (a retry, which the full script
-- answers with that lease).
-- A first holder kept in the limit key (lib_sem.lua) it moves into the
-- holders' keys first, as every script that needs more of the semaphore does
-- (lib_sem_life.lua unfold). A semaphore that went idle since (no limit in
-- force, no holder, no waiter: its last holder left) it takes as the first try
-- does, its holder kept in the limit key: a name in use goes idle and back
-- many times a second, and each time the full script would answer instead.
-- Anything else it leaves to sem_acquire.lua, which the gateway then runs: it
-- answers "contended" without a write.
-- What it does is what sem_acquire.lua does for the same call: issues a fence
-- only while the sequence may (lib_lease.lua), writes the holder's record and
-- expiry, keeps the semaphore's keys alive (lib_sem_life.lua keep_alive) and
-- the request_id for as long as the lease (lib_lease.lua rid_take).
-- The name is in the listing index already where a holder is there.
-- KEYS: holders data queue waiters limit tickets fence fence_limit index rids rid_until rid_one rid_moved
--   those keys of lib_sem.lua and lib_lease.lua, index the semaphores' listing index, rid_moved the
--   request's own id's key a first try moves rid_one's value to (lib_lease.lua rid_take_first)
--   (the request ids' four come last: a call without a request_id names none of them)
-- ARGV: name lease ttl_ms max_hold_ms limit tail request_id first_tail
--   lease: a fresh lease id; tail: the holder record's JSON from its claimed field on
--   (lib_sem_holder.lua record_join), of a claimed grant:
--   ',"claimed":1,"rid":<request_id>,"inst":"<instance>","attach":"<attach>","owner":<owner>}';
--   request_id: "" for none; first_tail: the same holder's record as a first holder keeps it, from the
--   lease on (lib_holder.lua holder_join, as sem_acquire_fast.lua's tail)
-- Returns (lib_lease.lua lease_reply): granted {fence, granted_at} (the lease and ttl are the
-- gateway's own), contended {}, nofence {}: no fence may be issued (as sem_acquire_fast.lua), or
-- repeat {}: a request_id that names a lease.
-- A request_id's look at the keys rid_one and rid_moved joins the first read, and its look at
-- whether the request-id set exists the EXISTS of the queue (lib_lease.lua rid_busy_look).
local v = A_request_id == '' and redis.call('MGET', KEYS[7], KEYS[8], KEYS[5])
          or redis.call('MGET', KEYS[7], KEYS[8], KEYS[5], KEYS[12], KEYS[13])
local in_force = v[3]
-- idle: no limit in force (no key, or the end's record of the last lease); first: the limit key holds
-- the first holder, of the limit asked
local idle = not in_force or is_end(in_force)
local first = not idle and in_force ~= A_limit and string.match(in_force, '^=(%d+) ') == A_limit
if not idle and in_force ~= A_limit and not first then return lease_reply('contended') end
if not fences_left(v) then return lease_reply('nofence') end
if idle then
  return first_slot_take(KEYS[5], KEYS[1], KEYS[3], KEYS[7], KEYS[9], KEYS[11], KEYS[12], v, A_name, A_limit,
                         A_ttl_ms, A_first_tail, A_request_id)
end

local queued, rid_set_exists = queue_busy_look(KEYS[11], KEYS[3], A_request_id, v[4])
if queued then return lease_reply('contended') end
local limit = A_limit + 0
local now, at = now_ms_and_text()
local held = redis.call('ZCARD', KEYS[1])
if first then
  -- Nothing but the limit key exists beside a first holder (lib_sem.lua).
  if held > 0 or limit < 2 then return lease_reply('contended') end
elseif held == 0 or held >= limit or redis.call('ZCOUNT', KEYS[1], '-inf', at) > 0 then
  return lease_reply('contended')
end
if A_request_id ~= ''
   and not rid_take(KEYS[10], KEYS[11], KEYS[12], v[4], v[5], A_request_id, A_lease,
                    now + A_ttl_ms + REQUEST_ID_GRACE_MS, now, rid_set_exists) then
  return lease_reply('repeat')
end
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], w = KEYS[4], l = KEYS[5], t = KEYS[6], fresh = false, latest = 0,
           first = false, held = false}
if first then unfold(k, in_force, now) end
return slot_take(k, KEYS[7], A_lease, A_ttl_ms, A_max_hold_ms, A_tail, now, at)
