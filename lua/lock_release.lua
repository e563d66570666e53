-- uses: lib_lease.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_release.lua: the holder releases; the lock passes to the next live
-- waiter in the same step.
-- KEYS: lib_lock.lua
-- ARGV: name lease claim_ms marker_ms instance
--   marker_ms: how long the released marker is kept; instance: the gateway's id
-- Returns JSON {r=..., handoff?} (handoff: the grant to a waiter of this gateway,
-- see grant_next): released {held_ms} (or {again=true} for a repeated release of
-- the same lease), lost {} (the lease expired or was taken over).
local name, lease = A_name, A_lease
local claim_ms, keep_ms = tonumber(A_claim_ms), tonumber(A_marker_ms)
local k = lock_keys()
local now = now_ms()

local h = redis.call('HMGET', k.h, 'lease', 'granted_at', 'ttl', 'fence')
if h[1] == lease then
  local handoff = {}
  local next = release_to_next(k, name, lease, h[4], h[3], claim_ms, keep_ms, A_marker_ms, now,
                               A_instance, handoff)
  index_drop_if_idle(k, name, next == false)
  return answer('{"r":"released","held_ms":' .. decimal(now - tonumber(h[2])) .. '}', handoff)
end
if was_released(k, lease, now) then
  return cjson.encode({r = 'released', again = true})
end
return cjson.encode({r = 'lost'})
