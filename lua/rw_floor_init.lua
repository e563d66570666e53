-- SPDX-License-Identifier: Apache-2.0
-- rw_floor_init.lua: gives a Redis Cluster slot used for the first time its
-- write floor, 0 (lib_rw.lua answers "nofloor" without one), unless it has one.
-- No key of the slot was ever written through the gateway (sql/060_fence_slots.sql).
-- KEYS: fence_floor
--   KEY_FENCE_FLOOR ":{T(s)}"
-- ARGV:
-- Returns JSON {floor} (the floor afterwards).
redis.call('SET', KEYS[1], '0', 'NX')
return cjson.encode({floor = tonumber(redis.call('GET', KEYS[1]))})
