-- uses: lib_lease.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_revoke.lua: an operator revokes the lease with fence F on lock N: the
-- fence joins the revoked set (so no write presenting it is accepted from now
-- on), and if that lease still holds the lock it ends at once and the lock
-- passes to the next live waiter in the same step.
-- KEYS: lib_lock.lua
-- ARGV: name fence claim_ms marker_ms instance
--   marker_ms: how long the ended marker is kept; instance: the gateway's id
-- Returns JSON {r=..., handoff?} (handoff: the grant to a waiter of this gateway,
-- see grant_next): revoked {fence} (the lease held and was ended), gone {}
-- (it no longer held; its fence is revoked all the same), norevoked {} (the
-- revoked set must be rebuilt first, lib_lease.lua).
local name, fence = A_name, tonumber(A_fence)
local claim_ms, marker_ttl = tonumber(A_claim_ms), tonumber(A_marker_ms)
local k = lock_keys()

if not revoked_ready(k) then return cjson.encode({r = 'norevoked'}) end
redis.call('SADD', k.revoked, A_fence)
local h = redis.call('HMGET', k.h, 'lease', 'fence')
if not h[1] or tonumber(h[2]) ~= fence then return cjson.encode({r = 'gone'}) end
local now = now_ms()
redis.call('DEL', k.h)
mark_ended(k, 'l', name, fence, 'revoked', marker_ttl)
local handoff = {}
index_drop_if_idle(k, name, grant_next(k, name, claim_ms, now, A_instance, handoff) == false)
return answer({r = 'revoked', fence = fence}, handoff)
