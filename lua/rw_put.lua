-- uses: lib_rw.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_put.lua: fenced PUT of a string value (replaces a string, or makes the key;
-- a key of another type is refused, left as it is).
-- KEYS: lib_rw.lua
-- flags: allow-cross-slot-keys
--   the revoked set lives in another slot of this node (lib_rw.lua)
-- ARGV: lib_rw.lua value
--   value: the new value
-- Returns JSON {r=...}: applied {fence} (the value is the gateway's own: not
-- echoed, which would cost Redis its JSON), stale or revoked {current, audit_id,
-- at_ms, floor?, below_floor?}, nofloor {}, norevoked {} or elsewhere {} (lib_rw.lua),
-- wrongtype {type, want} (the key holds another type than a string: nothing is
-- written, not even the fence).
local stale = refuse_stale()
if stale then return stale end
-- STRLEN refuses a key of another type (and answers 0 for none); only then is
-- its type asked, to name it (an integer reply costs Lua less than TYPE's).
if type(redis.pcall('STRLEN', KEYS[1])) == 'table' then
  return cjson.encode({r = 'wrongtype', type = redis.call('TYPE', KEYS[1]).ok, want = 'string'})
end
-- raise_fence and the value in one command (the key and its fence share a slot).
redis.call('MSET', KEYS[2], A_fence, KEYS[1], A_value)
return '{"r":"applied","fence":' .. A_fence .. '}'
