-- uses: lib_lease.lua lib_sem_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_release_fast.lua: the first try of a release of a slot of semaphore N:
-- the only holder, live, releases while nobody waits, which leaves the
-- semaphore idle: its keys go at once, and the end's record of its lease takes
-- the limit's place (lib_sem.lua), naming only the keys that touches. Anything
-- else (other holders, waiters, a lease that no longer holds, a retried
-- release) it leaves to sem_release.lua, which the gateway then runs: it
-- answers "contended" without a write.
-- KEYS: holders data queue waiters tickets limit watched index
--   those keys of lib_sem.lua and lib_lease.lua, index the semaphores' listing index
-- ARGV: name lease
-- Returns (lib_lease.lua lease_reply): released {now, granted_at} (or {held_ms}, a record of another
-- layout), or contended {}.
local lease = A_lease
local raw = redis.call('HGET', KEYS[2], lease)
if not raw then return lease_reply('contended') end
local at = now_text()
local now = at + 0
local first = redis.call('ZRANGE', KEYS[1], '0', '1', 'WITHSCORES')
if #first ~= 2 or first[1] ~= lease or first[2] + 0 <= now then return lease_reply('contended') end
local v = redis.call('MGET', KEYS[7], KEYS[5])
if v[2] and redis.call('EXISTS', KEYS[3]) ~= 0 then return lease_reply('contended') end
local fence, ttl, granted_at = holder_numbers(raw)
if type(fence) == 'number' then fence = decimal(fence) end
if type(ttl) == 'number' then ttl = decimal(ttl) end
-- Kept as long as the lease's ttl, if that is longer, compared as texts.
local keep = decimal_above(ttl, RELEASED_KEPT) and ttl or RELEASED_KEPT
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('SET', KEYS[6], end_text(lease, fence, 'released', at, keep), 'PX', keep)
if v[1] then publish_end('s', A_name, fence, 'released') end
redis.call('ZREM', KEYS[8], A_name)
-- The release's time and the grant's (as the record has it), of which the gateway makes the hold's length.
if type(granted_at) == 'string' then return lease_reply('released', nil, R_NOW, at, R_GRANTED_AT, granted_at) end
return lease_reply('released', nil, R_HELD_MS, decimal(now - (granted_at or now)))
