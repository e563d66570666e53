-- uses: lib_rw.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_delete.lua: fenced DELETE of a string or hash key (its fence stays).
-- KEYS: lib_rw.lua
-- flags: allow-cross-slot-keys
--   the revoked set lives in another slot of this node (lib_rw.lua)
-- ARGV: lib_rw.lua
-- Returns JSON {r=...}: applied {fence}, stale or revoked {current, audit_id,
-- at_ms, floor?, below_floor?}, nofloor {}, norevoked {} or elsewhere {} (lib_rw.lua), missing {} (no such key: nothing
-- is stored, not even a fence, so that deletes of keys that never existed cannot
-- fill Redis with fence keys), wrongtype {type, want} (a key of a type the
-- gateway does not write, a list or a set: nothing is deleted nor stored).
local stale = refuse_stale()
if stale then return stale end
-- TYPE answers both whether the key is there and whether it is the gateway's
-- to delete; the fence is stored only once the key is gone.
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then return '{"r":"missing"}' end
if kind ~= 'string' and kind ~= 'hash' then
  return cjson.encode({r = 'wrongtype', type = kind, want = 'string or hash'})
end
redis.call('DEL', KEYS[1])
raise_fence()
return '{"r":"applied","fence":' .. A_fence .. '}'
