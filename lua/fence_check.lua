-- SPDX-License-Identifier: Apache-2.0
-- fence_check.lua: run by a gateway on each new connection, before anything
-- else, to learn whether Redis may have lost fences it issued. The sequence is
-- trusted only while KEY_FENCE_ORIGIN names the Redis process that answers
-- (its run_id) and the sequence exists; otherwise Redis restarted (maybe from an
-- older snapshot or a truncated AOF), failed over, or was flushed, and the
-- sequence may have gone back. Then the reserved limit, the origin and the
-- Redis write floor are deleted, so that no script of any gateway issues a
-- fence or applies a Redis write until a recovery (lua/fence_raise.lua) made
-- after this moment raises the sequence and the floor again; and so is the
-- revoked set, which may have lost revocations too: the next script that needs
-- it answers "norevoked" and the gateway rebuilds it from Postgres.
-- KEYS: fence fence_limit fence_origin fence_floor revoked
--   (KEY_FENCE, KEY_FENCE_LIMIT, KEY_FENCE_ORIGIN, KEY_FENCE_FLOOR, KEY_REVOKED)
-- ARGV: run_id
--   the run_id of the Redis process ("" unknown: never trusted)
-- Returns JSON {trusted, limit (the reserved limit, when trusted)}.
local v = redis.call('MGET', KEYS[1], KEYS[3], KEYS[2])
if A_run_id ~= '' and v[1] ~= false and v[2] == A_run_id then
  return cjson.encode({trusted = true, limit = tonumber(v[3] or '0')})
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return cjson.encode({trusted = false})
