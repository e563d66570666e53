-- SPDX-License-Identifier: Apache-2.0
-- rw_get.lua: reads a fenced key and its highest fence (no token needed).
-- KEYS: key write_fence
--   the key, its fence KEY_WRITE_FENCE_PREFIX..key
-- ARGV: max_fields max_bytes
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
--   the most hash fields, or bytes of a string, read
-- Returns JSON {type ("string", "hash", "none" or another Redis type), value
-- (string) or fields (hash), fence (absent if none stored)}; a hash or string
-- over the limits (written around the gateway) comes as {type, oversize = its
-- fields or bytes, fence} without its content, so that one read cannot hold
-- Redis, and every request behind it, for seconds.
local kind = redis.call('TYPE', KEYS[1]).ok
local stored = redis.call('GET', KEYS[2])
local out = {type = kind}
if stored then out.fence = tonumber(stored) end
if kind == 'string' then
  local len = redis.call('STRLEN', KEYS[1])
  if len > tonumber(A_max_bytes) then out.oversize = len else out.value = redis.call('GET', KEYS[1]) end
elseif kind == 'hash' then
  local n = redis.call('HLEN', KEYS[1])
  if n > tonumber(A_max_fields) then
    out.oversize = n
  else
    local flat = redis.call('HGETALL', KEYS[1])
    local fields = {}
    for j = 1, #flat, 2 do fields[flat[j]] = flat[j + 1] end
    out.fields = fields
  end
end
return cjson.encode(out)
