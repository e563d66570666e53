-- SPDX-License-Identifier: Apache-2.0
-- fence_read.lua: what fence recovery needs to know of the sequence.
-- KEYS: fence fence_origin fence_limit
--   (KEY_FENCE, KEY_FENCE_ORIGIN, KEY_FENCE_LIMIT)
-- ARGV:
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {fence (-1 when the sequence is missing), trusted (the sequence
-- has not gone back since the origin was set, lua/fence_check.lua), ready
-- (trusted and below its limit: another recovery already ran), limit}.
local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
local trusted = v[1] ~= false and v[2] ~= false
local ready = trusted and v[3] ~= false and tonumber(v[1]) < tonumber(v[3])
return cjson.encode({fence = tonumber(v[1] or '-1'), trusted = trusted, ready = ready,
                     limit = tonumber(v[3] or '-1')})
