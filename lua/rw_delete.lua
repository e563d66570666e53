-- uses: lib_rw.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_delete.lua: fenced DELETE of the key (its fence stays).
-- KEYS: lib_rw.lua
-- flags: allow-cross-slot-keys
--   the revoked set lives in another slot of this node (lib_rw.lua)
-- ARGV: lib_rw.lua
-- Returns JSON {r=...}: applied {fence}, stale or revoked {current, audit_id,
-- at_ms, floor?}, nofloor {}, norevoked {} or elsewhere {} (lib_rw.lua), missing {} (no such key: nothing
-- is stored, not even a fence, so that deletes of keys that never existed cannot
-- fill Redis with fence keys).
local stale = refuse_stale()
if stale then return stale end
if redis.call('EXISTS', KEYS[1]) == 0 then return cjson.encode({r = 'missing'}) end
raise_fence()
redis.call('DEL', KEYS[1])
return '{"r":"applied","fence":' .. A_fence .. '}'
