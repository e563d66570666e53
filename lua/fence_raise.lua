-- fence_raise.lua: raises the fence sequence to at least a floor (the highest
-- fence stored in Postgres), creating it if Redis lost it. Never lowers it.
-- KEYS[1] "fg:fence"
-- ARGV[1] floor
-- Returns JSON {fence} (the sequence's value afterwards).
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
local floor = tonumber(ARGV[1])
if cur < floor then
  redis.call('SET', KEYS[1], ARGV[1])
  cur = floor
end
return cjson.encode({fence = cur})
