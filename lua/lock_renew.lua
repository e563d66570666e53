-- uses: lib_lease.lua lib_lock.lua
-- lock_renew.lua: the holder extends its lease; the fence stays the same.
-- KEYS: see lib_lock.lua (holder, queue, waiters, then the common lease keys)
-- ARGV: lease, ttl_ms ("0": the lease's own ttl)
-- Returns JSON {r=...}: renewed {fence, ttl, expires_at}, lost {},
-- max_hold {hold_until} (the new expiry would pass max_hold_ms).
local lease, ttl = ARGV[1], tonumber(ARGV[2])
local k = lock_keys()
local h = redis.call('HMGET', k.h, 'lease', 'fence', 'ttl', 'hold_until', 'rid')
if h[1] ~= lease then return cjson.encode({r = 'lost'}) end
if ttl == 0 then ttl = tonumber(h[3]) end
local now = now_ms()
if now + ttl > tonumber(h[4]) then
  return cjson.encode({r = 'max_hold', hold_until = tonumber(h[4])})
end
redis.call('HSET', k.h, 'claimed', '1')
redis.call('PEXPIRE', k.h, ttl)
rid_hold(k, h[5], lease, now + ttl, now)
return cjson.encode({r = 'renewed', fence = tonumber(h[2]), ttl = ttl, expires_at = now + ttl})
