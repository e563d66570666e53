-- uses: lib_lease.lua lib_holder.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_renew.lua: the holder extends its lease; the fence stays the same.
-- max_hold_ms caps the hold: the new expiry is min(now + ttl, hold_until).
-- KEYS: lib_lock.lua
-- ARGV: lease ttl_ms
--   ttl_ms "0": the lease's own ttl
-- Returns (lib_lease.lua lease_reply): renewed {fence, ttl, expires_at, hold_until}, lost {},
-- max_hold {hold_until} (the hold deadline is reached: nothing is left to grant).
local lease, ttl = A_lease, tonumber(A_ttl_ms)
local k = lock_keys()
local h = holder_read(redis.call('GET', k.h))
if not h or h.lease ~= lease then return lease_reply('lost') end
if ttl == 0 then ttl = tonumber(h.ttl) end
local now, hold_until = now_ms(), h.granted_at + h.max_hold
if now >= hold_until then
  return lease_reply('max_hold', nil, R_HOLD_UNTIL, decimal(hold_until))
end
local expires_at = math.min(now + ttl, hold_until)
redis.call('SET', k.h, holder_rewrite(h, '1', h.attach), 'PX', decimal(expires_at - now))
rid_hold(k, h.rid, lease, expires_at, now)
return lease_reply('renewed', nil, R_FENCE, h.fence, R_TTL, decimal(expires_at - now), R_EXPIRES_AT,
                   decimal(expires_at), R_HOLD_UNTIL, decimal(hold_until))
