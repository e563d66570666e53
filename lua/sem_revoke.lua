-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua lib_sem.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_revoke.lua: an operator revokes the holder with fence F of semaphore N:
-- the fence joins the revoked set (no write presenting it is accepted from now
-- on), and if that holder still holds a slot it loses it at once; the slot
-- passes to the oldest live waiter in the same step.
-- KEYS: lib_sem.lua
-- ARGV: name fence claim_ms marker_ms keep_ms instance
--   marker_ms: how long the ended marker is kept; instance: the gateway's id
-- Returns (lib_lease.lua lease_reply, with the grants handed over, see grant_free): revoked {fence},
-- gone {} (no live holder has that fence; it is revoked all the same),
-- norevoked {} (the revoked set must be rebuilt first, lib_lease.lua).
local name, fence = A_name, tonumber(A_fence)
local marker_ttl, keep_ms = tonumber(A_marker_ms), tonumber(A_keep_ms)
local inst = A_instance
local k = sem_keys()
local handoff = {}
if not revoked_ready(k) then return lease_reply('norevoked') end
redis.call('SADD', k.revoked, A_fence)
local now = now_ms()
unfold_now(k, now)
purge(k, now)
local revoked = false
for _, lease in ipairs(redis.call('ZRANGE', k.h, 0, -1)) do
  local rec = holder_of(k, lease)
  if rec and rec.fence == fence then
    redis.call('ZREM', k.h, lease)
    redis.call('HDEL', k.d, lease)
    mark_ended(k, 's', name, fence, 'revoked', now, now + marker_ttl)
    revoked = true
    break
  end
end
grant_free(k, name, limit_in_force(k), A_claim_ms, now, inst, handoff)
tidy(k, now, keep_ms)
if revoked then return lease_reply('revoked', handoff, R_FENCE, A_fence) end
return lease_reply('gone', handoff)
