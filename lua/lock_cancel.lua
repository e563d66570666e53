-- uses: lib_lease.lua lib_holder.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_cancel.lua: a waiter or an unclaimed grant is given up.
-- KEYS: lib_lock.lua
-- ARGV: name lease attach mode claim_ms marker_ms instance
--   attach "" matches any, but in mode place, which names the connection it saw waiting;
--   marker_ms: how long the released marker is kept; instance: the gateway's id. Modes:
--   take    the waiter's deadline passed: a grant that arrived meanwhile is kept
--   drop    the waiter's client hung up or the gateway stops: leave the queue, or
--           free the lock if it had been granted (and not claimed by a retry)
--   place   a lock set's retry that will not wait drops the place of the attempt it saw waiting
--           there (attach: that attempt's connection, whose gateway is rung): a waiter only, never
--           a grant; a place a later retry took over meanwhile (another connection) is left to it
--   orphan  a doorbell found no waiter: free the grant only if still unclaimed and made to
--           this gateway (instance)
-- Returns (lib_lease.lua lease_reply):
--   granted {lease, fence, ttl, expires_at}  mode take, and the lease holds the lock
--   granted {}                               mode place: the place was granted to the attempt named
--                                            meanwhile (the retry asks again and takes it over)
--   released {waiting}                       the grant was freed and handed on (with the
--                                            grant to a waiter of this gateway, see
--                                            grant_next); waiting: the queue's length after
--   canceled {waiting}                       the lease left the queue
--   superseded {}                            a retry of the same request owns it now (mode place: a
--                                            later one took the place, or its grant, over)
--   gone {waiting}                           nothing to do (mode orphan: {})
local name, lease, attach, mode = A_name, A_lease, A_attach, A_mode
local k = lock_keys()
local now = now_ms()

local v = lock_end_read()
local h = holder_read(v[3])
if h and h.lease == lease then
  if mode == 'take' then
    local expires_at
    if h.claimed == '0' then
      expires_at = holder_claim(k, h, now, attach)
    else
      expires_at = now + redis.call('PTTL', k.h)
    end
    return holder_granted_reply(h, expires_at)
  end
  -- A place granted meanwhile is never freed by a retry dropping it: the retry takes over a grant to the
  -- attempt it saw, and leaves one a later retry took over (its connection named now) to that one.
  if mode == 'place' then return lease_reply(h.attach == attach and 'granted' or 'superseded') end
  -- An orphan is a grant this gateway found no waiter for: it gives back only a grant made to this
  -- gateway, never one a retry of the request_id took over through another (its holder names that one).
  if mode == 'orphan' and (h.claimed ~= '0' or h.inst ~= A_instance) then return lease_reply('gone') end
  if attach ~= '' and h.attach ~= attach then return lease_reply('superseded') end
  local handoff = {}
  local next = end_and_pass(k, name, h, 'released', tonumber(A_claim_ms), A_marker_ms, now, A_instance,
                            handoff, v)
  index_drop_if_idle(k, name, next == false)
  -- Its client was never answered this grant: a retry of the request (a lock
  -- set's, after a reset) acquires afresh, as a waiter's that left the queue.
  rid_forget(k, h.rid, lease)
  return lease_reply('released', handoff, R_WAITING, decimal(redis.call('ZCARD', k.q)))
end
if mode == 'orphan' then return lease_reply('gone') end

-- Every answer that the lease is out of the queue says how long the queue is (a lock set that gives up
-- names it, whatever became of its place: lockset_wait.c).
local raw = redis.call('HGET', k.w, lease)
if not raw then return lease_reply('gone', nil, R_WAITING, decimal(redis.call('ZCARD', k.q))) end
local w = cjson.decode(raw)
local w_attach = w.attach or ''
-- A lock set's retry drops only the place of the attempt it saw: one a later retry took over is that one's.
if mode == 'place' and w_attach ~= attach then return lease_reply('superseded') end
-- A waiter record of no attempt (attach "": written by a retry of its request_id
-- that would not wait, as earlier releases did) has nobody waiting on it: any give-up takes it.
if attach ~= '' and w_attach ~= attach and w_attach ~= '' then return lease_reply('superseded') end
rid_leave(k, w.rid, lease)
redis.call('ZREM', k.q, lease)
redis.call('HDEL', k.w, lease)
queue_settled(k)
-- A retry took the place of an attempt that still waits and gave it up (mode place: a lock set's
-- retry that would not wait): the attempt's doorbell tells it, so it looks again and, finding its
-- place marked as left (rid_leave), answers superseded at once.
if mode == 'place' and w_attach ~= '' and w.inst then ring_wake(w.inst, lease, name) end
return lease_reply('canceled', nil, R_WAITING, decimal(redis.call('ZCARD', k.q)))
