-- uses: lib_lease.lua lib_lock.lua
-- lock_renew.lua: the holder extends its lease; the fence stays the same.
-- KEYS[1] holder hash
-- ARGV: lease, ttl_ms ("0": the lease's own ttl)
-- Returns JSON {r=...}: renewed {fence, ttl, expires_at}, lost {},
-- max_hold {hold_until} (the new expiry would pass max_hold_ms).
local hkey, lease, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local h = redis.call('HMGET', hkey, 'lease', 'fence', 'ttl', 'hold_until')
if h[1] ~= lease then return cjson.encode({r = 'lost'}) end
if ttl == 0 then ttl = tonumber(h[3]) end
local now = now_ms()
if now + ttl > tonumber(h[4]) then
  return cjson.encode({r = 'max_hold', hold_until = tonumber(h[4])})
end
redis.call('HSET', hkey, 'claimed', '1')
redis.call('PEXPIRE', hkey, ttl)
return cjson.encode({r = 'renewed', fence = tonumber(h[2]), ttl = ttl, expires_at = now + ttl})
