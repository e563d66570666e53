-- uses: lib_lease.lua lib_holder.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_revoke.lua: an operator revokes the lease with fence F on lock N: the
-- fence joins the revoked set (so no write presenting it is accepted from now
-- on), and if that lease still holds the lock it ends at once and the lock
-- passes to the next live waiter in the same step.
-- KEYS: lib_lock.lua
-- ARGV: name fence claim_ms marker_ms instance
--   marker_ms: how long the ended marker is kept; instance: the gateway's id
-- Returns (lib_lease.lua lease_reply, with the grant to a waiter of this gateway, see
-- grant_next): revoked {fence} (the lease held and was ended), gone {}
-- (it no longer held; its fence is revoked all the same), norevoked {} (the
-- revoked set must be rebuilt first, lib_lease.lua).
local name, fence = A_name, tonumber(A_fence)
local k = lock_keys()

if not revoked_ready(k) then return lease_reply('norevoked') end
redis.call('SADD', k.revoked, A_fence)
local v = lock_end_read()
local h = holder_read(v[3])
if not h or tonumber(h.fence) ~= fence then return lease_reply('gone') end
local now = now_ms()
local handoff = {}
local next = end_and_pass(k, name, h, 'revoked', tonumber(A_claim_ms), A_marker_ms, now, A_instance,
                          handoff, v)
index_drop_if_idle(k, name, next == false)
return lease_reply('revoked', handoff, R_FENCE, A_fence)
