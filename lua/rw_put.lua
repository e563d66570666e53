-- uses: lib_rw.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_put.lua: fenced PUT of a string value (replaces the key, whatever it held).
-- KEYS: lib_rw.lua
-- flags: allow-cross-slot-keys
--   the revoked set lives in another slot of this node (lib_rw.lua)
-- ARGV: lib_rw.lua value
--   value: the new value
-- Returns JSON {r=...}: applied {fence} (the value is the gateway's own: not
-- echoed, which would cost Redis its JSON), stale or revoked {current, audit_id,
-- at_ms, floor?}, nofloor {}, norevoked {} or elsewhere {} (lib_rw.lua).
local stale = refuse_stale()
if stale then return stale end
-- raise_fence and the value in one command (the key and its fence share a slot).
redis.call('MSET', KEYS[2], A_fence, KEYS[1], A_value)
return '{"r":"applied","fence":' .. A_fence .. '}'
