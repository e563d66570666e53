-- uses: lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_status.lua: what a status call shows of lock N (never the token).
-- KEYS: holder queue
--   (lib_lock.lua)
-- ARGV:
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {held, fence, owner, pttl, waiting}.
local h = holder_read(redis.call('GET', KEYS[1]))
local out = {held = h ~= nil, waiting = redis.call('ZCARD', KEYS[2])}
if h then
  out.fence = tonumber(h.fence)
  out.owner = h.owner
  out.pttl = redis.call('PTTL', KEYS[1])
end
return cjson.encode(out)
