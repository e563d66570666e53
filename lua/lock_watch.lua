-- uses: lib_lease.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_watch.lua: whether the lease with fence F still holds lock N, and if
-- not, how it ended (read-only).
-- KEYS: holder ended
--   the holder hash (lib_lock.lua), the ended leases (lib_lease.lua)
-- ARGV: fence
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {held=true, pttl} or {held=false, reason="released"|"expired"|"revoked"}.
local h = redis.call('HMGET', KEYS[1], 'fence')
if tonumber(h[1]) == tonumber(A_fence) then
  return cjson.encode({held = true, pttl = redis.call('PTTL', KEYS[1])})
end
return cjson.encode({held = false, reason = ended_reason(KEYS[2], tonumber(A_fence))})
