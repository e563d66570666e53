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
-- A string within the limit is read with its fence in one MGET, and its reply
-- written by hand (cjson.encode of a table costs more than the read's
-- commands); any other key is answered through a table.

-- The reply for a string key within the limit. A fence key that holds no
-- positive decimal without leading zeros (written around the gateway) is left
-- out of it, as the reply below leaves out one that tonumber cannot read.
local function string_reply()
  local v = redis.call('MGET', KEYS[1], KEYS[2])
  local fence = v[2] and string.find(v[2], '^[1-9]%d*$') and ',"fence":' .. v[2] or ''
  return '{"type":"string","value":' .. cjson.encode(v[1]) .. fence .. '}'
end

local kind = redis.call('TYPE', KEYS[1]).ok
local out = {type = kind}
if kind == 'string' then
  local len = redis.call('STRLEN', KEYS[1])
  if len <= tonumber(A_max_bytes) then return string_reply() end
  out.oversize = len
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
local stored = redis.call('GET', KEYS[2])
if stored then out.fence = tonumber(stored) end
return cjson.encode(out)
