-- uses: lib_rw.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_patch.lua: fenced PATCH of hash fields.
-- KEYS: lib_rw.lua
-- flags: allow-cross-slot-keys
--   the revoked set lives in another slot of this node (lib_rw.lua)
-- ARGV: lib_rw.lua fields max_fields
--   fields: a JSON object of field -> string (set it) or null (delete it);
--   max_fields: the most fields the hash may hold
-- Returns JSON {r=...}: applied {fence} (the fields written are the gateway's
-- own: not echoed), stale or revoked {current, audit_id, at_ms, floor?},
-- nofloor {}, norevoked {} or elsewhere {} (lib_rw.lua), wrongtype {type} (the key is not a hash),
-- toomany {fields, max} (the hash would hold more than max_fields fields; nothing is
-- written).
local stale = refuse_stale()
if stale then return stale end
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'hash' and kind ~= 'none' then
  return cjson.encode({r = 'wrongtype', type = kind})
end
local patch = cjson.decode(A_fields)
local size, max = redis.call('HLEN', KEYS[1]), tonumber(A_max_fields)
for field, value in pairs(patch) do
  local present = redis.call('HEXISTS', KEYS[1], field) == 1
  if value == cjson.null and present then size = size - 1 end
  if value ~= cjson.null and not present then size = size + 1 end
end
if size > max then return cjson.encode({r = 'toomany', fields = size, max = max}) end
raise_fence()
for field, value in pairs(patch) do
  if value == cjson.null then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, value)
  end
end
return '{"r":"applied","fence":' .. A_fence .. '}'
