-- SPDX-License-Identifier: Apache-2.0
-- revoked_add.lua: adds a revoked fence to one slot's revoked set on a Redis
-- Cluster, if the set exists: a revocation reaches every set a write script
-- may read, wherever a reshard left it (lib_rw.lua). A missing set is not
-- created: the first write that needs it rebuilds it from Postgres, where the
-- revocation is committed before this runs.
-- KEYS: revoked
--   KEY_REVOKED ":{T(s)}"
-- ARGV: fence
--   the revoked fence
-- Returns JSON {added = 0 | 1} (1: the set exists and holds the fence now).
if redis.call('EXISTS', KEYS[1]) == 0 then return '{"added":0}' end
redis.call('SADD', KEYS[1], A_fence)
return '{"added":1}'
