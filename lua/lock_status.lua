-- SPDX-License-Identifier: Apache-2.0
-- lock_status.lua: what a status call shows of lock N (never the token).
-- KEYS: holder queue
--   (lib_lock.lua)
-- ARGV:
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {held, fence, owner, pttl, waiting}.
local h = redis.call('HMGET', KEYS[1], 'lease', 'fence', 'owner')
local out = {held = h[1] ~= false, waiting = redis.call('ZCARD', KEYS[2])}
if h[1] then
  out.fence = tonumber(h[2])
  out.owner = h[3]
  out.pttl = redis.call('PTTL', KEYS[1])
end
return cjson.encode(out)
