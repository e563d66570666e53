-- uses: lib_lease.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_revoke.lua: an operator revokes the lease with fence F on lock N: the
-- fence joins the revoked set (so no write presenting it is accepted from now
-- on), and if that lease still holds the lock it ends at once and the lock
-- passes to the next live waiter in the same step.
-- KEYS[1] holder hash, KEYS[2] queue, KEYS[3] waiter hash, KEYS[4] "fg:fence",
-- KEYS[5] "fg:revoked"
-- ARGV: base, name, fence, claim_ms, ended marker ttl ms
-- Returns JSON {r=...}: revoked {fence} (the lease held and was ended), gone {}
-- (it no longer held; its fence is revoked all the same), norevoked {} (the
-- revoked set must be rebuilt first, lib_lease.lua).
local base, name, fence = ARGV[1], ARGV[2], tonumber(ARGV[3])
local claim_ms, marker_ttl = tonumber(ARGV[4]), tonumber(ARGV[5])
local hkey, fence_key, revoked_key = KEYS[1], KEYS[4], KEYS[5]

if not revoked_ready(revoked_key) then return cjson.encode({r = 'norevoked'}) end
redis.call('SADD', revoked_key, ARGV[3])
local h = redis.call('HMGET', hkey, 'lease', 'fence')
if not h[1] or tonumber(h[2]) ~= fence then return cjson.encode({r = 'gone'}) end
local now = now_ms()
redis.call('DEL', hkey)
mark_ended(base, 'l', name, fence, 'revoked', marker_ttl)
grant_next(base, fence_key, name, claim_ms, now)
return cjson.encode({r = 'revoked', fence = fence})
