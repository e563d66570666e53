-- uses: lib_lease.lua lib_sem_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_acquire_fast.lua: the first try of an acquire without a request_id on
-- semaphore N: takes the first slot of an idle semaphore (no limit in force,
-- no holder, no waiter), naming only the keys that takes (Redis hands each
-- key and argument of a call to Lua at a price). Anything else it leaves to
-- sem_acquire.lua, which the gateway then runs: it answers "contended" without
-- a write. What it does is what sem_acquire.lua does for the same call on an
-- idle semaphore (its grant_now and settle_first_holder, lib_sem.lua): issues
-- a fence only while the sequence may (lib_lease.lua), keeps the end of the
-- lease before in the history (end_bury).
-- KEYS: holders data queue limit fence fence_limit index released ended
--   those keys of lib_sem.lua and lib_lease.lua, index the semaphores' listing index
-- ARGV: name lease ttl_ms max_hold_ms limit tail
--   lease: a fresh id; tail: the holder record from claimed on (lib_sem_holder.lua holder_join),
--   ',"claimed":1,"rid":"","inst":"<instance>","attach":"<attach>","owner":<owner as JSON>}'
-- Returns (lib_lease.lua lease_reply): granted {lease, fence, ttl, expires_at}, or contended {}: in use,
-- no fence may be issued, or a limit key this script does not read.
local v = redis.call('MGET', KEYS[5], KEYS[6], KEYS[4])
local prior = v[3]
if not fences_left(v) or (prior and string.byte(prior, 1) ~= 126) -- '~': an end's record
   or redis.call('EXISTS', KEYS[1], KEYS[3]) ~= 0 then
  return lease_reply('contended')
end
local now = now_ms()
redis.call('ZADD', KEYS[7], '0', A_name)
local lease, ttl = A_lease, A_ttl_ms
local fence = decimal(redis.call('INCR', KEYS[5]))
local expires_at = now + ttl
local expires_text = decimal(expires_at)
redis.call('HSET', KEYS[2], lease, holder_join(fence, ttl, A_max_hold_ms, decimal(now), A_tail))
redis.call('ZADD', KEYS[1], expires_text, lease)
-- The keys live SEM_KEEP_MS and a half past the lease (lib_sem.lua keys_ttl).
local keys_ttl = decimal(SEM_KEEP_MS * 1.5 + ttl)
if prior then end_bury({released = KEYS[8], ended = KEYS[9]}, prior, now) end
redis.call('SET', KEYS[4], A_limit, 'PX', keys_ttl)
redis.call('PEXPIRE', KEYS[1], keys_ttl)
redis.call('PEXPIRE', KEYS[2], keys_ttl)
return lease_reply('granted', nil, R_LEASE, lease, R_FENCE, fence, R_TTL, ttl, R_EXPIRES_AT, expires_text)
