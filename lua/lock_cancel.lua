-- uses: lib_lease.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_cancel.lua: a waiter or an unclaimed grant is given up.
-- KEYS[1] holder hash, KEYS[2] queue, KEYS[3] waiter hash, KEYS[4] "fg:fence"
-- ARGV: base, name, lease, attach id ("" matches any), mode, claim_ms,
--       released marker ttl ms. Modes:
--   take    the waiter's deadline passed: a grant that arrived meanwhile is kept
--   drop    the waiter's client hung up or the gateway stops: leave the queue, or
--           free the lock if it had been granted (and not claimed by a retry)
--   orphan  a doorbell found no waiter: free the grant only if still unclaimed
-- Returns JSON {r=...}:
--   granted {lease, fence, ttl, expires_at}  mode take, and the lease holds the lock
--   released {}                              the grant was freed and handed on
--   canceled {waiting}                       the lease left the queue
--   superseded {}                            a retry of the same request owns it now
--   gone {}                                  nothing to do
local base, name, lease, attach, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local claim_ms, marker_ttl = tonumber(ARGV[6]), tonumber(ARGV[7])
local hkey, qkey, wkey, fence_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = now_ms()

local h = redis.call('HMGET', hkey, 'lease', 'claimed', 'attach', 'fence')
if h[1] == lease then
  if mode == 'take' then
    local expires_at = now + redis.call('PTTL', hkey)
    if h[2] == '0' then expires_at = claim(hkey, now, attach) end
    return granted_reply(hkey, lease, expires_at)
  end
  if mode == 'orphan' and h[2] ~= '0' then return cjson.encode({r = 'gone'}) end
  if attach ~= '' and h[3] ~= attach then return cjson.encode({r = 'superseded'}) end
  redis.call('DEL', hkey)
  mark_released(base, lease, now, marker_ttl)
  mark_ended(base, 'l', name, tonumber(h[4]), 'released', marker_ttl)
  grant_next(base, fence_key, name, claim_ms, now)
  return cjson.encode({r = 'released'})
end
if mode == 'orphan' then return cjson.encode({r = 'gone'}) end

local raw = redis.call('HGET', wkey, lease)
if not raw then return cjson.encode({r = 'gone'}) end
local w = cjson.decode(raw)
if attach ~= '' and w.attach ~= attach then return cjson.encode({r = 'superseded'}) end
if w.rid ~= '' then redis.call('DEL', base .. 'r:' .. w.rid) end
redis.call('ZREM', qkey, lease)
redis.call('HDEL', wkey, lease)
return cjson.encode({r = 'canceled', waiting = redis.call('ZCARD', qkey)})
