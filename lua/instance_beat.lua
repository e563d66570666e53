-- SPDX-License-Identifier: Apache-2.0
-- instance_beat.lua: keeps a gateway process marked alive. Its waiters stay in
-- the queues only while its mark lasts, so a dead process's waiters are dropped
-- within one waiter lease. Marks that ran out are pruned here.
-- KEYS: gateways
--   KEY_GATEWAYS (sorted set gateway id -> alive until, Redis time ms)
-- ARGV: instance lease_ms
--   this gateway's instance id, how long its mark lasts
-- Returns JSON {ok=true}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(A_lease_ms), A_instance)
return cjson.encode({ok = true})
