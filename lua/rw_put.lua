-- uses: lib_rw.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_put.lua: fenced PUT of a string value (replaces the key, whatever it held).
-- KEYS: lib_rw.lua
-- ARGV: lib_rw.lua value
--   value: the new value
-- Returns JSON {r=...}: applied {fence, value}, stale or revoked {current, audit_id,
-- at_ms}, nofloor {} or norevoked {} (lib_rw.lua).
local stale = refuse_stale()
if stale then return stale end
raise_fence()
redis.call('SET', KEYS[1], A_value)
return cjson.encode({r = 'applied', fence = tonumber(A_fence), value = A_value})
