-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_renew.lua: a holder extends its lease on semaphore N; the fence stays the same.
-- KEYS: lib_sem.lua
-- ARGV: name lease ttl_ms claim_ms keep_ms instance
--   ttl_ms "0": the lease's own ttl; instance: the gateway's id
-- Returns (lib_lease.lua lease_reply, with the grants handed over, see grant_free): renewed {fence, ttl,
-- expires_at, hold_until}, lost {}, max_hold {hold_until} (the hold deadline is reached).
-- max_hold_ms caps the hold: the new expiry is min(now + ttl, hold_until).
local name, lease, ttl = A_name, A_lease, tonumber(A_ttl_ms)
local keep_ms, inst = tonumber(A_keep_ms), A_instance
local k = sem_keys()
local handoff = {}
local now = now_ms()
unfold_now(k)
purge(k, now)
grant_free(k, name, limit_in_force(k), A_claim_ms, now, inst, handoff)
local rec = holder_of(k, lease)
local reply
if not rec then
  reply = {'lost'}
else
  if ttl == 0 then ttl = rec.ttl end
  local hold_until = rec.granted_at + rec.max_hold
  if now >= hold_until then
    reply = {'max_hold', R_HOLD_UNTIL, decimal(hold_until)}
  else
    local expires_at = math.min(now + ttl, hold_until)
    rec.claimed = 1
    redis.call('HSET', k.d, lease, record_json(rec))
    set_expiry(k, lease, expires_at)
    rid_hold(k, rec.rid, lease, expires_at, now)
    reply = {'renewed', R_FENCE, decimal(rec.fence), R_TTL, decimal(expires_at - now), R_EXPIRES_AT,
             decimal(expires_at), R_HOLD_UNTIL, decimal(hold_until)}
  end
end
tidy(k, now, keep_ms)
return lease_reply(reply[1], handoff, unpack(reply, 2))
