-- SPDX-License-Identifier: Apache-2.0
-- fence_raise.lua: after Postgres reserved fences up to limit, raises the fence
-- sequence to at least floor and its limit to at least limit. Never lowers
-- either: another gateway may have reserved a later block meanwhile. After a
-- loss, also records the Redis process the sequence is now
-- trusted on, and raises the write floor: every token issued before the loss
-- belongs to a lease the loss ended, and Redis-resource writes below the floor
-- are refused (lib_rw.lua), since their resources' fences may be lost too.
-- KEYS: fence fence_limit fence_origin fence_floor
--   (KEY_FENCE, KEY_FENCE_LIMIT, KEY_FENCE_ORIGIN, KEY_FENCE_FLOOR)
-- ARGV: floor limit lost run_id
--   lost is "1" after a loss; run_id names the Redis process recovered ("" unknown)
-- Returns JSON {fence, limit} (the values afterwards).
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
if A_lost == '1' then
  redis.call('SET', KEYS[3], A_run_id)
  if tonumber(redis.call('GET', KEYS[4]) or '-1') < floor then redis.call('SET', KEYS[4], A_floor) end
end
return cjson.encode({fence = cur, limit = lim})
