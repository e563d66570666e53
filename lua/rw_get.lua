-- rw_get.lua: reads a fenced key and its highest fence (no token needed).
-- KEYS[1] the key, KEYS[2] its fence "fg:rf:"..key
-- Returns JSON {type ("string", "hash", "none" or another Redis type), value
-- (string) or fields (hash), fence (absent if none stored)}.
local kind = redis.call('TYPE', KEYS[1]).ok
local stored = redis.call('GET', KEYS[2])
local out = {type = kind}
if stored then out.fence = tonumber(stored) end
if kind == 'string' then
  out.value = redis.call('GET', KEYS[1])
elseif kind == 'hash' then
  local flat = redis.call('HGETALL', KEYS[1])
  local fields = {}
  for j = 1, #flat, 2 do fields[flat[j]] = flat[j + 1] end
  out.fields = fields
end
return cjson.encode(out)
