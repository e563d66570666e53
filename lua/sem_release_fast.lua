-- uses: lib_lease.lua lib_holder.lua lib_sem_first.lua
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
return first_holder_release(KEYS[1], KEYS[3], redis.call('MGET', KEYS[1], KEYS[2]), A_name, A_lease)
       or lease_reply('contended')
