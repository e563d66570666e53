-- SPDX-License-Identifier: Apache-2.0
-- revoked_load.lua: rebuilds a revoked-fence set from Postgres's list (the
-- set is a mirror of fencegate.revocations, lib_lease.lua), in one step so
-- that no write script ever sees it half built.
-- KEYS: revoked
--   KEY_REVOKED (on a Redis Cluster, the set of a slot: lib_rw.lua)
-- ARGV: fences run_id
--   a JSON array of every revoked fence, as strings (exact beyond 2^53); the
--   run_id of the process that runs the script ("" on one Redis), which the set
--   then holds as the member "run:<run_id>": the write scripts of a cluster
--   read only a set rebuilt on their own process (lib_rw.lua). A load of no
--   fences and no run_id creates the set before Postgres is read, so that a
--   revocation committed meanwhile is added to it (revoked_add.lua).
-- Returns JSON {size} (members after the load, the "0" marker included).
local fences = cjson.decode(A_fences)
redis.call('SADD', KEYS[1], '0')
for i = 1, #fences, 1000 do
  local chunk = {}
  for j = i, math.min(i + 999, #fences) do chunk[#chunk + 1] = fences[j] end
  redis.call('SADD', KEYS[1], unpack(chunk))
end
if A_run_id ~= '' then redis.call('SADD', KEYS[1], 'run:' .. A_run_id) end
return cjson.encode({size = redis.call('SCARD', KEYS[1])})
