-- SPDX-License-Identifier: Apache-2.0
-- sem_status.lua: what a status call shows of semaphore N (never a token).
-- Read-only: expired holders are not counted, but left for the next transition.
-- KEYS: holders queue limit
--   (lib_sem.lua)
-- ARGV:
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {limit (absent if none in force), holders, waiting}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holders = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local waiting = redis.call('ZCARD', KEYS[2])
local limit = tonumber(redis.call('GET', KEYS[3]))
if holders == 0 and waiting == 0 then limit = nil end
return cjson.encode({limit = limit, holders = holders, waiting = waiting})
