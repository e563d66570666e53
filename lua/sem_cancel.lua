-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua lib_sem.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_cancel.lua: a waiter or an unclaimed grant of semaphore N is given up.
-- KEYS: lib_sem.lua
-- ARGV: name lease attach mode claim_ms marker_ms keep_ms instance
--   attach "" matches any; marker_ms: how long the released marker is kept. Modes:
--   take    the waiter's deadline passed: a grant that arrived meanwhile is kept
--   drop    the waiter's client hung up or the gateway stops: leave the queue, or
--           free the slot if it had been granted (and not claimed by a retry)
--   orphan  a grant found no waiter: free it only if still unclaimed and made to this
--           gateway (instance)
-- Returns (lib_lease.lua lease_reply, with the grants handed over, see grant_free):
--   granted {lease, fence, ttl, expires_at}  mode take, and the lease holds a slot
--   released {}                              the grant was freed and handed on
--   canceled {waiting}                       the lease left the queue
--   superseded {}                            a retry of the same request owns it now
--   gone {}                                  nothing to do
local name, lease, attach, mode = A_name, A_lease, A_attach, A_mode
local keep_ms = tonumber(A_keep_ms)
local inst = A_instance
local k = sem_keys()
local handoff = {}
local now = now_ms()
unfold_now(k, now)
purge(k, now)
local limit = limit_in_force(k)
grant_free(k, name, limit, A_claim_ms, now, inst, handoff)
for i = #handoff, 1, -1 do
  if handoff[i].lease == lease then table.remove(handoff, i) end
end

local function done(r, ...)
  tidy(k, now, keep_ms)
  return lease_reply(r, handoff, ...)
end

local rec = holder_of(k, lease)
if rec then
  if mode == 'take' then
    local expires_at = tonumber(redis.call('ZSCORE', k.h, lease))
    if rec.claimed == 0 then expires_at = claim(k, lease, rec, now, attach) end
    tidy(k, now, keep_ms)
    return granted_reply(lease, rec, expires_at, handoff)
  end
  -- Only a grant made to this gateway is its orphan (lock_cancel.lua).
  if mode == 'orphan' and (rec.claimed ~= 0 or rec.inst ~= inst) then return done('gone') end
  if attach ~= '' and rec.attach ~= attach then return done('superseded') end
  redis.call('ZREM', k.h, lease)
  redis.call('HDEL', k.d, lease)
  mark_released(k, 's', name, rec.fence, now, A_marker_ms, decimal(rec.ttl or 0))
  grant_free(k, name, limit, A_claim_ms, now, inst, handoff)
  -- Its client was never answered this grant: a retry of the request takes a
  -- slot afresh, as a waiter's that left the queue (lock_cancel.lua does the same).
  rid_forget(k, rec.rid, lease)
  return done('released')
end
if mode == 'orphan' then return done('gone') end

local raw = redis.call('HGET', k.w, lease)
if not raw then return done('gone') end
local w = cjson.decode(raw)
-- A waiter record of no attempt (attach "": a retry of its request_id that
-- would not wait took it over) has nobody waiting on it: any give-up takes it.
if attach ~= '' and w.attach ~= attach and w.attach ~= '' then return done('superseded') end
rid_leave(k, w.rid, lease)
redis.call('ZREM', k.q, lease)
redis.call('HDEL', k.w, lease)
return done('canceled', R_WAITING, decimal(redis.call('ZCARD', k.q)))
