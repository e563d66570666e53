-- SPDX-License-Identifier: Apache-2.0
-- fence_read.lua: what fence recovery needs to know of the sequence.
-- KEYS: fence fence_origin fence_limit fence_floor
--   (KEY_FENCE, KEY_FENCE_ORIGIN, KEY_FENCE_LIMIT, KEY_FENCE_FLOOR; on a Redis
--   Cluster those of one slot, the limit named after the run_id of the process
--   that runs this script: store/backend/shared_keys.h)
-- ARGV:
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {fence (-1 when the sequence is missing), trusted (the sequence
-- has not gone back since the origin was set, lua/fence_check.lua), ready
-- (trusted and below its limit: another recovery already ran), limit, origin
-- (the run_id of the process the sequence was last recovered on, "" if
-- none), floor (whether the write floor exists), here (on a Redis Cluster the
-- run_id of the process that runs this script, from the limit's name; "" on
-- one Redis)}.
local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
local trusted = v[1] ~= false and v[2] ~= false
local ready = trusted and v[3] ~= false and tonumber(v[1]) < tonumber(v[3])
local here = KEYS[3] == KEY_FENCE_LIMIT and '' or string.sub(KEYS[3], -40)
return cjson.encode({fence = tonumber(v[1] or '-1'), trusted = trusted, ready = ready,
                     limit = tonumber(v[3] or '-1'), origin = v[2] or '', floor = v[4] ~= false,
                     here = here})
