-- uses: lib_lease.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_watch.lua: whether the holder with fence F still holds a slot of
-- semaphore N, and if not, how its lease ended (read-only: expired holders
-- count as ended but are left for the next transition to purge).
-- KEYS: holders data ended
--   the holders and holder data (lib_sem.lua), the ended leases (lib_lease.lua)
-- ARGV: fence
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {held=true, pttl} or {held=false, reason="released"|"expired"|"revoked"}.
local fence = tonumber(A_fence)
local now = now_ms()
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local raw = redis.call('HGET', KEYS[2], live[i])
  if raw and cjson.decode(raw).fence == fence then
    return cjson.encode({held = true, pttl = tonumber(live[i + 1]) - now})
  end
end
return cjson.encode({held = false, reason = ended_reason(KEYS[3], fence)})
