-- uses: lib_rw.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_patch.lua: fenced PATCH of hash fields.
-- KEYS: lib_rw.lua
-- flags: allow-cross-slot-keys
--   the revoked set lives in another slot of this node (lib_rw.lua)
-- ARGV: lib_rw.lua max_fields sets fields...
--   max_fields: the most fields the hash may hold; sets: how many fields the
--   patch sets; fields: their field value pairs, then the fields it deletes
--   (arguments as they are, where one JSON text would cost a decode and a
--   table of its own)
-- Only a patch that could take the hash over max_fields (were every field it
-- sets new) asks which fields the hash has; then it writes the fields set in
-- one HSET and those deleted in one HDEL.
-- Returns JSON {r=...}: applied {fence} (the fields written are the gateway's
-- own: not echoed), stale or revoked {current, audit_id, at_ms, floor?, below_floor?},
-- nofloor {}, norevoked {} or elsewhere {} (lib_rw.lua), wrongtype {type, want} (the key is not a hash),
-- toomany {fields, max} (the hash would hold more than max_fields fields; nothing is
-- written), missing {} (a patch that only deletes fields, of a key that does not
-- exist: nothing is stored, not even a fence, as for a delete).
local stale = refuse_stale()
if stale then return stale end
local size = redis.pcall('HLEN', KEYS[1])
if type(size) == 'table' then -- the key holds another type: named by a second look
  return cjson.encode({r = 'wrongtype', type = redis.call('TYPE', KEYS[1]).ok, want = 'hash'})
end
if size == 0 and A_sets == '0' then return '{"r":"missing"}' end -- a hash is never empty
local max, last = tonumber(A_max_fields), #A_fields
local gone_at = A_fields_at + 2 * tonumber(A_sets) -- the first field deleted
local after = size + (gone_at - A_fields_at) / 2 -- the hash's size once written, at most
if after > max then -- it may go over: count what the patch adds and removes
  after = size
  for i = A_fields_at, gone_at - 1, 2 do
    if redis.call('HEXISTS', KEYS[1], A_fields[i]) == 0 then after = after + 1 end
  end
  for i = gone_at, last do
    if redis.call('HEXISTS', KEYS[1], A_fields[i]) == 1 then after = after - 1 end
  end
end
if after > max then return cjson.encode({r = 'toomany', fields = after, max = max}) end
raise_fence()
for i = A_fields_at, gone_at - 1, 1000 do -- one HSET for every 500 fields (unpack's stack is bounded)
  redis.call('HSET', KEYS[1], unpack(A_fields, i, math.min(i + 999, gone_at - 1)))
end
for i = gone_at, last, 1000 do
  redis.call('HDEL', KEYS[1], unpack(A_fields, i, math.min(i + 999, last)))
end
return '{"r":"applied","fence":' .. A_fence .. '}'
