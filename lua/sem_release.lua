-- uses: lib_lease.lua lib_sem.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_release.lua: a holder releases its slot of semaphore N; the slot passes
-- to the oldest live waiter in the same step.
-- KEYS: lib_sem.lua
-- ARGV: name lease claim_ms marker_ms keep_ms instance
--   marker_ms: how long the released marker is kept; instance: the gateway's id
-- Returns JSON {r=..., handoff?} (handoff: see grant_free): released {held_ms} (also
-- for a repeated release of the same lease, then with again=true), lost {}
-- (the lease expired or was dropped).
local name, lease = A_name, A_lease
local claim_ms, marker_ttl, keep_ms = tonumber(A_claim_ms), tonumber(A_marker_ms), tonumber(A_keep_ms)
local inst = A_instance
local k = sem_keys()
local handoff = {}
local now = now_ms()
purge(k, now)
local reply
local raw = redis.call('HGET', k.d, lease)
if raw then
  redis.call('ZREM', k.h, lease)
  redis.call('HDEL', k.d, lease)
  local rec = cjson.decode(raw)
  mark_released(k, lease, now, marker_ttl, rec.ttl)
  mark_ended(k, 's', name, rec.fence, 'released', A_marker_ms)
  reply = '{"r":"released","held_ms":' .. decimal(now - (rec.granted_at or now)) .. '}'
elseif was_released(k, lease, now) then
  reply = {r = 'released', again = true}
else
  reply = {r = 'lost'}
end
local idle = redis.call('EXISTS', k.h, k.q) == 0 -- nobody holds or waits: nothing to grant
if idle then
  forget(k)
else
  grant_free(k, name, limit_in_force(k), claim_ms, now, inst, handoff)
  keep_alive(k, now, keep_ms)
end
index_drop_if_idle(k, name, idle)
return answer(reply, handoff)
