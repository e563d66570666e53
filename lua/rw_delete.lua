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
-- The key goes first: DEL answers whether it was there, and only then is the
-- fence stored (one command fewer than asking EXISTS first).
if redis.call('DEL', KEYS[1]) == 0 then return '{"r":"missing"}' end
raise_fence()
return '{"r":"applied","fence":' .. A_fence .. '}'
