-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_release_fast.lua: the first try of a release of lock N: its holder
-- releases while nobody waits, naming only the keys that touches. Anything
-- else (a lease that no longer holds, a retried release, somebody waiting, to
-- whom the lock passes) it leaves to lock_release.lua, which the gateway then
-- runs: it answers "contended" without a write.
-- KEYS: holder watched tickets index
--   those keys of lib_lock.lua and lib_lease.lua, index the locks' listing index
-- ARGV: name lease
-- Returns (lib_lease.lua lease_reply): released {granted_at}, or contended {}.
local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
local h = not v[3] and holder_brief(v[1])
if not h or h.lease ~= A_lease then return lease_reply('contended') end
holder_end('l', KEYS[1], A_name, h, 'released', RELEASED_KEPT, v[2])
redis.call('ZREM', KEYS[4], A_name)
-- The grant's time: the gateway reckons the hold's length on its own reading of Redis's clock
-- (src/lease/redis_clock.c), so the release asks Redis no time.
return lease_reply('released', nil, R_GRANTED_AT, h.granted_at)
