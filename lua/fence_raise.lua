-- SPDX-License-Identifier: Apache-2.0
-- fence_raise.lua: after Postgres reserved fences up to limit, raises the fence
-- sequence to at least floor and its limit to at least limit. Never lowers
-- either: another gateway may have reserved a later block meanwhile.
-- KEYS[1] "fg:fence", KEYS[2] "fg:fence_limit"
-- ARGV[1] floor, ARGV[2] limit
-- Returns JSON {fence, limit} (the values afterwards).
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
local lim = tonumber(redis.call('GET', KEYS[2]) or '-1')
local floor, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if cur < floor then
  redis.call('SET', KEYS[1], ARGV[1])
  cur = floor
end
if lim < limit then
  redis.call('SET', KEYS[2], ARGV[2])
  lim = limit
end
return cjson.encode({fence = cur, limit = lim})
