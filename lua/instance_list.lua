-- SPDX-License-Identifier: Apache-2.0
-- instance_list.lua: the gateway processes whose liveness mark lasts now
-- (lua/instance_beat.lua renews each one's), for GET /v1/gateways.
-- KEYS: gateways
--   KEY_GATEWAYS (sorted set gateway id -> alive until, Redis time ms)
-- ARGV:
-- flags: no-writes
--   a read: marks that ran out stay for instance_beat.lua to prune
-- Returns JSON {now_ms (Redis time), gateways: [{id, alive_until_ms}, ...]}
-- in order of the time their marks run out; gateways is {} when empty (cjson).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
local out = {}
for i = 1, #v, 2 do
  out[#out + 1] = {id = v[i], alive_until_ms = tonumber(v[i + 1])}
end
return cjson.encode({now_ms = now, gateways = out})
