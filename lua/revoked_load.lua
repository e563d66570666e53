-- SPDX-License-Identifier: Apache-2.0
-- revoked_load.lua: rebuilds the revoked-fence set from Postgres's list (the
-- set is a mirror of fencegate.revocations, lib_lease.lua), in one step so
-- that no write script ever sees it half built.
-- KEYS: revoked
--   KEY_REVOKED
-- ARGV: fences
--   a JSON array of every revoked fence, as strings (exact beyond 2^53)
-- Returns JSON {size} (members after the load, the "0" marker included).
local fences = cjson.decode(A_fences)
redis.call('SADD', KEYS[1], '0')
for i = 1, #fences, 1000 do
  local chunk = {}
  for j = i, math.min(i + 999, #fences) do chunk[#chunk + 1] = fences[j] end
  redis.call('SADD', KEYS[1], unpack(chunk))
end
return cjson.encode({size = redis.call('SCARD', KEYS[1])})
