-- SPDX-License-Identifier: Apache-2.0
-- fence_raise.lua: after Postgres reserved fences up to limit, raises the fence
-- sequence to at least floor and its limit to at least limit. Never lowers
-- either: another gateway may have reserved a later block meanwhile. Records
-- the Redis process the sequence is now trusted on (the origin) when run_id is
-- given. After a loss, also raises the write floor: every token issued before
-- the loss belongs to a lease the loss ended, and Redis-resource writes below
-- the floor are refused (lib_rw.lua), since their resources' fences may be
-- lost too.
-- On a Redis Cluster (one slot's keys, the limit named after the run_id of the
-- process that runs this script) the origin is always set, to that run_id
-- (from the limit's name), and the limit named after the previous origin
-- (old_limit) is deleted: it was trusted on a process that no longer holds
-- the slot. An adoption of a moved slot (docs/cluster.md, "A moved slot")
-- names the origin it checked (from) and the process it checked it on (on):
-- if either changed since (the slot moved again, or another gateway recovered
-- it), nothing is written and the reply says moved.
-- KEYS: fence fence_limit fence_origin fence_floor old_limit
--   (KEY_FENCE, KEY_FENCE_LIMIT, KEY_FENCE_ORIGIN, KEY_FENCE_FLOOR, and on a
--   Redis Cluster the limit named after the previous origin; any other key of
--   the slot when there is none)
-- ARGV: floor limit lost first run_id from on
--   lost is "1" after a loss; first is "1" when Postgres reserved the first
--   block ever of this sequence (sql/060_fence_slots.sql): no key of its slot
--   was written through the gateway, and its write floor starts at 0 (lib_rw.lua
--   answers "nofloor" without one) in the same step as the sequence, so no
--   gateway stopping in between leaves a slot without a floor;
--   run_id names the Redis process recovered on one Redis ("": leave the
--   origin); from and on are "" but for an adoption
-- Returns JSON {fence, limit} (the values afterwards), or {moved = true}.
local one_redis = KEYS[2] == KEY_FENCE_LIMIT
local run_id = one_redis and A_run_id or string.sub(KEYS[2], -40)
local was = redis.call('GET', KEYS[3])
if A_on ~= '' and (A_on ~= run_id or was ~= A_from) then
  return cjson.encode({moved = true})
end
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
local lim = tonumber(redis.call('GET', KEYS[2]) or '-1')
local floor, limit = tonumber(A_floor), tonumber(A_limit)
if cur < floor then
  redis.call('SET', KEYS[1], A_floor)
  cur = floor
end
if lim < limit then
  redis.call('SET', KEYS[2], A_limit)
  lim = limit
end
if run_id ~= '' then redis.call('SET', KEYS[3], run_id) end
if not one_redis and was and was ~= run_id and KEYS[5] == string.sub(KEYS[2], 1, -41) .. was then
  redis.call('DEL', KEYS[5])
end
if A_lost == '1' then
  if tonumber(redis.call('GET', KEYS[4]) or '-1') < floor then redis.call('SET', KEYS[4], A_floor) end
elseif A_first == '1' then
  redis.call('SET', KEYS[4], '0', 'NX')
end
return cjson.encode({fence = cur, limit = lim})
