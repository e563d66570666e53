-- uses: lib_lease.lua lib_holder.lua lib_sem_first.lua lib_sem_holder.lua lib_sem_life.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_release_more.lua: a release of a holder of semaphore N, which the
-- gateway runs before sem_release.lua while its first try
-- (sem_release_fast.lua) or an acquire lately found N in use
-- (src/lease/contention.h): the holder leaves beside the others, naming only
-- the keys that touches (Redis hands each key and argument of a call to Lua at
-- a price). It releases only when the lease holds, nobody waits (the slot
-- would go on to the oldest waiter) and no holder's lease has run out
-- (sem_release.lua purges those first, and may leave the semaphore idle).
-- The last holder leaves the semaphore idle, as sem_release.lua leaves it:
-- one kept in the holders' keys takes them with it (lib_sem.lua forget), the
-- first holder kept in the limit key is released there as the first try does
-- (lib_sem_first.lua); a name in use goes idle and back many times a second.
-- Anything else (a retried release, a lease that no longer holds) it leaves
-- to sem_release.lua, which the gateway then runs: it answers "contended"
-- without a write.
-- What it does is what sem_release.lua does for the same call: drops the
-- holder, keeps its end in the ended set for retried releases and watchers,
-- and tells the watchers (lib_lease.lua mark_released). The keys' times to
-- live stand: they last SEM_KEEP_MS past every holder's expiry already.
-- KEYS: holders data queue ended watched index limit waiters tickets
--   those keys of lib_sem.lua and lib_lease.lua, index the semaphores' listing index
-- ARGV: name lease
-- Returns (lib_lease.lua lease_reply): released {granted_at}, or contended {}.
local raw = redis.call('HGET', KEYS[2], A_lease)
if not raw then
  return first_holder_release(KEYS[7], KEYS[6], redis.call('MGET', KEYS[7], KEYS[5]), A_name, A_lease)
         or lease_reply('contended')
end
if redis.call('EXISTS', KEYS[3]) == 1 then return lease_reply('contended') end
local now, at = now_ms_and_text()
local held = redis.call('ZCARD', KEYS[1])
if held == 0 or redis.call('ZCOUNT', KEYS[1], '-inf', at) > 0 then return lease_reply('contended') end
local k = {h = KEYS[1], d = KEYS[2], ended = KEYS[4], watched = KEYS[5]}
if held > 1 then return released_reply(nil, holder_leave(k, A_name, A_lease, raw, now)) end
-- The last holder (its record is in data, so it is this lease) leaves the semaphore idle: its keys go
-- (the queue's does not exist), and its name leaves the listing index.
redis.call('DEL', KEYS[1], KEYS[2], KEYS[7], KEYS[8], KEYS[9])
redis.call('ZREM', KEYS[6], A_name)
return released_reply(nil, holder_released(k, A_name, raw, now))
