-- uses: lib_rw.lua
-- rw_delete.lua: fenced DELETE of the key (its fence stays).
-- KEYS, ARGV[1..6]: see lib_rw.lua.
-- Returns JSON {r=...}: applied {fence, deleted}, stale or revoked {current, audit_id,
-- at_ms}, norevoked {} (lib_rw.lua).
local stale = refuse_stale()
if stale then return stale end
raise_fence()
local n = redis.call('DEL', KEYS[1])
return cjson.encode({r = 'applied', fence = tonumber(ARGV[1]), deleted = n == 1})
