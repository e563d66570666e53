-- uses: lib_rw.lua
-- rw_patch.lua: fenced PATCH of hash fields.
-- KEYS, ARGV[1..6]: see lib_rw.lua; ARGV[7] a JSON object of field -> string
-- (set it) or null (delete it).
-- Returns JSON {r=...}: applied {fence, fields (the hash afterwards)},
-- stale or revoked {current, audit_id, at_ms}, norevoked {} (lib_rw.lua), wrongtype
-- {type} (the key is not a hash).
local stale = refuse_stale()
if stale then return stale end
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'hash' and kind ~= 'none' then
  return cjson.encode({r = 'wrongtype', type = kind})
end
raise_fence()
for field, value in pairs(cjson.decode(ARGV[7])) do
  if value == cjson.null then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, value)
  end
end
local flat = redis.call('HGETALL', KEYS[1])
local fields = {}
for j = 1, #flat, 2 do fields[flat[j]] = flat[j + 1] end
return cjson.encode({r = 'applied', fence = tonumber(ARGV[1]), fields = fields})
