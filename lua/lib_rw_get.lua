-- SPDX-License-Identifier: Apache-2.0
-- lib_rw_get.lua: the read of a fenced key and its highest fence, shared by
-- rw_get.lua and rw_get_large.lua (prepended to each).
-- KEYS: key write_fence
--   the key, its fence KEY_WRITE_FENCE_PREFIX..key
-- ARGV: max_fields max_bytes
--   the most hash fields, or bytes of a string, read
-- A hash or string over those limits (written around the gateway) comes as
-- {type, oversize = its fields or bytes, fence} without its content, so that
-- one read cannot hold Redis, and every request behind it, for seconds.

-- The reply for a string key within the limit. A fence key that holds no
-- positive decimal without leading zeros (written around the gateway) is left
-- out of it, as the reply below leaves out one that tonumber cannot read.
local function string_reply()
  local v = redis.call('MGET', KEYS[1], KEYS[2])
  local fence = v[2] and string.find(v[2], '^[1-9]%d*$') and ',"fence":' .. v[2] or ''
  return '{"type":"string","value":' .. cjson.encode(v[1]) .. fence .. '}'
end

-- The JSON answer {type ("string", "hash", "none" or another Redis type),
-- value (string) or fields (hash), fence (absent if none stored)}; content of
-- more than large bytes (a string's, or a hash's names and values; nil: no
-- bound) comes as {type, large = its bytes, fence} without it. A string within
-- the limits is read with its fence in one MGET and its answer written by hand
-- (cjson.encode of a table costs more than the read's commands); any other key
-- is answered through a table.
local function get_answer(large)
  local kind = redis.call('TYPE', KEYS[1]).ok
  local out = {type = kind}
  if kind == 'string' then
    local len = redis.call('STRLEN', KEYS[1])
    if len > tonumber(A_max_bytes) then
      out.oversize = len
    elseif large and len > large then
      out.large = len
    else
      return string_reply()
    end
  elseif kind == 'hash' then
    local n = redis.call('HLEN', KEYS[1])
    if n > tonumber(A_max_fields) then
      out.oversize = n
    else
      local flat = redis.call('HGETALL', KEYS[1])
      local bytes = 0
      if large then
        for j = 1, #flat do bytes = bytes + #flat[j] end
      end
      if large and bytes > large then
        out.large = bytes
      else
        local fields = {}
        for j = 1, #flat, 2 do fields[flat[j]] = flat[j + 1] end
        out.fields = fields
      end
    end
  end
  local stored = redis.call('GET', KEYS[2])
  if stored then out.fence = tonumber(stored) end
  return cjson.encode(out)
end
