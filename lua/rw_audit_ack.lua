-- SPDX-License-Identifier: Apache-2.0
-- rw_audit_ack.lua: removes audit stream entries that are stored in Postgres.
-- KEYS: audit
--   KEY_AUDIT
-- ARGV: ids...
--   the entry ids
-- Returns JSON {deleted}.
local n = 0
if #A_ids > 0 then n = redis.call('XDEL', KEYS[1], unpack(A_ids)) end
return cjson.encode({deleted = n})
