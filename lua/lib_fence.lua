-- lib_fence.lua: the guard of the one fence sequence, shared by every script
-- that issues fences (prepended through "-- uses: lib_fence.lua ...").
--
-- "fg:fence" is the last fence issued; "fg:fence_limit" the highest fence that
-- Postgres has reserved (fencegate.fence_reservation). A script may start
-- issuing fences only while the sequence exists and is below the limit; else it
-- answers "nofence" and the gateway reserves the next block in Postgres, so a
-- fence is never issued that Postgres could not remember after Redis loses its
-- data. A script that issues several fences may pass the limit by at most the
-- fences it issues (bounded by the largest semaphore limit); recovery after a
-- loss skips that much.

-- True if fences may be issued now.
local function fence_ready(fence_key)
  local v = redis.call('MGET', fence_key, fence_key .. '_limit')
  return v[1] ~= false and v[2] ~= false and tonumber(v[1]) < tonumber(v[2])
end
