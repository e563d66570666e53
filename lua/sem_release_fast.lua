-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_release_fast.lua: the first try of a release of a slot of semaphore N:
-- its first holder, kept in the limit key (sem_acquire_fast.lua), releases.
-- Nobody waits then (a call that queues moves the holder out of that key
-- first, lib_sem.lua unfold), so the semaphore is idle: the end's record of
-- the lease takes the limit key's place, naming only the keys that touches.
-- Anything else (a holder in the holders' keys, a lease that no longer holds,
-- a retried release) it leaves to sem_release.lua, which the gateway then
-- runs: it answers "contended" without a write.
-- KEYS: limit watched index
--   those keys of lib_sem.lua and lib_lease.lua, index the semaphores' listing index
-- ARGV: name lease
-- Returns (lib_lease.lua lease_reply): released {granted_at}, or contended {}.
local v = redis.call('MGET', KEYS[1], KEYS[2])
local h = holder_brief(v[1], FIRST_HOLDER_BRIEF)
if not h or h.lease ~= A_lease then return lease_reply('contended') end
holder_end('s', KEYS[1], A_name, h, 'released', RELEASED_KEPT, v[2])
redis.call('ZREM', KEYS[3], A_name)
-- The grant's time: the gateway reckons the hold's length on its own reading of Redis's clock
-- (src/lease/redis_clock.c), so the release asks Redis no time.
return lease_reply('released', nil, R_GRANTED_AT, h.granted_at)
