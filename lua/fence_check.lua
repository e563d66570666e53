-- SPDX-License-Identifier: Apache-2.0
-- fence_check.lua: run by a gateway on each new connection, before anything
-- else, to learn whether Redis may have lost fences it issued. The sequence is
-- trusted only while "fg:fence_origin" names the Redis process that answers
-- (its run_id) and the sequence exists; otherwise Redis restarted (maybe from an
-- older snapshot or a truncated AOF), failed over, or was flushed, and the
-- sequence may have gone back. Then the reserved limit, the origin and the
-- Redis write floor are deleted, so that no script of any gateway issues a
-- fence or applies a Redis write until a recovery (lua/fence_raise.lua) made
-- after this moment raises the sequence and the floor again; and so is the
-- revoked set, which may have lost revocations too: the next script that needs
-- it answers "norevoked" and the gateway rebuilds it from Postgres.
-- KEYS[1] "fg:fence", KEYS[2] "fg:fence_limit", KEYS[3] "fg:fence_origin",
-- KEYS[4] "fg:fence_floor", KEYS[5] "fg:revoked"
-- ARGV[1] run_id of the Redis process ("" unknown: never trusted)
-- Returns JSON {trusted, limit (the reserved limit, when trusted)}.
local v = redis.call('MGET', KEYS[1], KEYS[3], KEYS[2])
if ARGV[1] ~= '' and v[1] ~= false and v[2] == ARGV[1] then
  return cjson.encode({trusted = true, limit = tonumber(v[3] or '0')})
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return cjson.encode({trusted = false})
