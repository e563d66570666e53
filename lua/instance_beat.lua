-- SPDX-License-Identifier: Apache-2.0
-- instance_beat.lua: keeps a gateway process marked alive. Its waiters stay in
-- the queues only while its mark lasts, so a dead process's waiters are dropped
-- within one waiter lease. Marks that ran out are pruned here.
-- KEYS: gateways
--   KEY_GATEWAYS (sorted set gateway id -> alive until, Redis time ms), or on a
--   cluster that key of a slot where this gateway has waiters ("<key>:{T(s)}")
-- ARGV: instance lease_ms slot
--   this gateway's instance id, how long its mark lasts; slot: "1" for a slot's
--   key, which then lives as long as its last mark (lib_lease.lua gateway_mark), else ""
-- Returns JSON {ok=true}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(A_lease_ms), A_instance)
if A_slot == '1' then
  local ms = tonumber(A_lease_ms)
  if redis.call('PEXPIRE', KEYS[1], ms, 'GT') == 0 then redis.call('PEXPIRE', KEYS[1], ms, 'NX') end
end
return cjson.encode({ok = true})
