-- uses: lib_lock.lua
-- lock_release.lua: the holder releases; the lock passes to the next live
-- waiter in the same step.
-- KEYS[1] holder hash, KEYS[2] queue, KEYS[3] waiter hash, KEYS[4] "fg:fence"
-- ARGV: base, name, lease, claim_ms, released marker ttl ms
-- Returns JSON {r=...}: released {} (also for a repeated release of the same
-- lease), lost {} (the lease expired or was taken over).
local base, name, lease = ARGV[1], ARGV[2], ARGV[3]
local claim_ms, marker_ttl = tonumber(ARGV[4]), tonumber(ARGV[5])
local hkey, fence_key = KEYS[1], KEYS[4]

if redis.call('HGET', hkey, 'lease') == lease then
  redis.call('DEL', hkey)
  redis.call('SET', base .. 'x:' .. lease, '1', 'PX', marker_ttl)
  grant_next(base, fence_key, name, claim_ms, now_ms())
  return cjson.encode({r = 'released'})
end
if redis.call('EXISTS', base .. 'x:' .. lease) == 1 then
  return cjson.encode({r = 'released', again = true})
end
return cjson.encode({r = 'lost'})
