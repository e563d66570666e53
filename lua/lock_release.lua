-- uses: lib_lease.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_release.lua: the holder releases; the lock passes to the next live
-- waiter in the same step.
-- KEYS[1] holder hash, KEYS[2] queue, KEYS[3] waiter hash, KEYS[4] "fg:fence"
-- ARGV: base, name, lease, claim_ms, released marker ttl ms
-- Returns JSON {r=...}: released {held_ms} (or {again=true} for a repeated
-- release of the same lease), lost {} (the lease expired or was taken over).
local base, name, lease = ARGV[1], ARGV[2], ARGV[3]
local claim_ms, marker_ttl = tonumber(ARGV[4]), tonumber(ARGV[5])
local hkey, fence_key = KEYS[1], KEYS[4]

local h = redis.call('HMGET', hkey, 'lease', 'granted_at', 'fence')
if h[1] == lease then
  local now = now_ms()
  redis.call('DEL', hkey)
  mark_released(base, lease, now, marker_ttl)
  mark_ended(base, 'l', name, tonumber(h[3]), 'released', marker_ttl)
  grant_next(base, fence_key, name, claim_ms, now)
  index_drop_if_idle('fg:idx:lk', name,
                     redis.call('EXISTS', hkey) == 0 and redis.call('EXISTS', KEYS[2]) == 0)
  return cjson.encode({r = 'released', held_ms = now - tonumber(h[2])})
end
if was_released(base, lease, now_ms(), marker_ttl) then
  return cjson.encode({r = 'released', again = true})
end
return cjson.encode({r = 'lost'})
