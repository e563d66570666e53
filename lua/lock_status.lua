-- uses: lib_holder.lua lib_waiters.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_status.lua: what a status call shows of lock N (never the token).
-- KEYS: holder queue waiters
--   (lib_lock.lua)
-- ARGV: waiters
--   waiters: how many of the first waiters to list (0: none)
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {held, fence, owner, pttl, waiting, first}; first: [{owner, since}] of the
-- first waiters in queue order (since: ms, Redis TIME, it joined the queue; 0 if unknown).
local h = holder_read(redis.call('GET', KEYS[1]))
local out = {held = h ~= nil, waiting = redis.call('ZCARD', KEYS[2])}
if h then
  out.fence = tonumber(h.fence)
  out.owner = h.owner
  out.pttl = redis.call('PTTL', KEYS[1])
end
if out.waiting > 0 and A_waiters ~= '0' then
  out.first = first_waiters(KEYS[2], KEYS[3], tonumber(A_waiters))
end
return cjson.encode(out)
