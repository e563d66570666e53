-- uses: lib_waiters.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_status.lua: what a status call shows of semaphore N (never a token).
-- Read-only: expired holders are not counted, but left for the next transition.
-- KEYS: holders queue limit waiters
--   (lib_sem.lua; the limit key may hold the first holder)
-- ARGV: waiters
--   waiters: how many of the first waiters to list (0: none)
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns JSON {limit (absent if none in force), holders, waiting, first}; first: [{owner, since}]
-- of the first waiters in queue order (since: ms, Redis TIME, it joined the queue; 0 if unknown).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holders = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local waiting = redis.call('ZCARD', KEYS[2])
local raw = redis.call('GET', KEYS[3])
local limit = tonumber(raw)
if holders == 0 and waiting == 0 then limit = nil end
-- A first holder kept in the limit key (lib_sem.lua) holds while that key lives.
local first = raw and string.match(raw, '^=(%d+) ')
if first then limit, holders = tonumber(first), holders + 1 end
local out = {limit = limit, holders = holders, waiting = waiting}
if waiting > 0 and A_waiters ~= '0' then
  out.first = first_waiters(KEYS[2], KEYS[4], tonumber(A_waiters))
end
return cjson.encode(out)
