-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua lib_sem.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_acquire.lua: one acquire attempt on semaphore N, first or repeated.
-- KEYS: lib_sem.lua rid_moved
--   rid_moved: the request's own id's key a first try moves rid_one's value to
--   (lib_lease.lua rid_take_first), the last
-- ARGV: name lease request_id ttl_ms max_hold_ms owner wait instance attach claim_ms
-- ARGV: max_waiters request_id_ttl_ms limit mark_ms
--   lease: an id no call named before, or with wait "again" the id of a queued attempt
--   looking again; either gives way to the id this request already has; request_id: ""
--   for none; wait: "1" to queue, "0" not to, "again" to queue as an attempt looking
--   again; instance: the gateway's id; attach: the asking connection's id
--   mark_ms: a caller that waits marks its gateway alive that long in the lease's slot
--   (lib_lease.lua gateway_mark: on a cluster), "" for no mark
--   The keys of a semaphore in use live SEM_KEEP_MS past its last lease (src/fglimits.h).
-- Returns (lib_lease.lua lease_reply, with the grants to other waiters of this gateway, see
-- grant_free):
--   granted  {lease, fence, ttl, expires_at}  the caller holds a slot
--   queued   {lease, position, holder_pttl}   the caller waits; holder_pttl: ms until
--                                             the earliest holder lease ends (-1: none); with
--                                             wait "0" (a retry whose request_id's place is
--                                             queued, left as it is) with waiting, the queue's length
--   busy     {waiting}                        no free slot and the caller will not wait
--   full     {waiting}                        the queue is at max_waiters (waiters of
--                                             dead gateways are dropped first)
--   mismatch {limit}                          another limit is in force
--   ended    {lease}                          this request_id's lease is over
--   superseded {}                              a retry of the request took the slot (or its place in
--                                             the queue) over from this attempt, which looks again (or
--                                             took its place over and gave it up: lib_lease.lua rid_leave)
--   nofence  {}                               no fence may be issued (lib_lease.lua)
local name, lease, rid = A_name, A_lease, A_request_id
local owner, again = A_owner, A_wait == 'again'
local wait = again or A_wait == '1'
local inst, attach, keep_ms = A_instance, A_attach, SEM_KEEP_MS
local k = sem_keys()
local handoff = {}

local ready, limit_text = fence_ready_and_get(k, k.l)
if not ready then return lease_reply('nofence') end
local now = now_ms()
limit_text = unfold(k, limit_text, now)

local prior, place_left = rid_lease(k, rid, now, KEYS[#KEYS])
local known = prior ~= nil
-- recheck: the caller names the lease its request_id already has, so it is an
-- attempt looking again (a retry names a fresh id). One whose slot or queue
-- place a retry took over (another connection is named) leaves it to the
-- retry: taking it back would let its give-up (sem_cancel.lua, drop with its
-- attach) release what the retry was answered (lock_acquire.lua does the same).
local recheck = known and prior == lease
if known then lease = prior end
-- fresh: an id no call named before neither holds a slot nor waits, so
-- nothing of it is looked up.
local fresh = not again and not known

local function done(r, ...)
  tidy(k, now, keep_ms)
  return lease_reply(r, handoff, ...)
end

-- Makes the caller a holder now; returns the reply that says so.
local function grant_now()
  local fence = decimal(redis.call('INCR', k.fence))
  local expires_at = now + tonumber(A_ttl_ms)
  local expires_text = decimal(expires_at)
  redis.call('HSET', k.d, lease, holder_json(fence, owner, A_ttl_ms, A_max_hold_ms, decimal(now), '1',
                                             rid, inst, attach))
  set_expiry(k, lease, expires_at, expires_text)
  rid_hold(k, rid, lease, expires_at, now)
  return lease_reply('granted', handoff, R_LEASE, lease, R_FENCE, fence,
                     R_TTL, A_ttl_ms, R_EXPIRES_AT, expires_text)
end

-- An attempt looking again whose place a retry took over and gave up (lock_acquire.lua) answers
-- superseded, never queues again at the back; one dropped as a dead gateway's waiter queues anew.
-- Its keys get their times to live (done): unfold may have made holders and data anew.
if again and place_left == lease then return done('superseded') end

local in_force = tonumber(limit_text) -- the limit in force, or nil (none, or an end's record)
if not in_force and not known and redis.call('EXISTS', k.h, k.q) == 0 then
  -- Idle (no limit, holder or waiter): the first slot, without the looks at
  -- holders, queue and expired leases that a semaphore in use needs.
  index_add(k, name)
  local reply = grant_now()
  settle_first_holder(k, now, keep_ms, A_limit, limit_text)
  return reply
end
-- In use: the limit as a number (the other numbers are read where they are used).
local limit = tonumber(A_limit)
purge_count(k, now, in_force or limit)
if in_force and in_force ~= limit then
  local busy = holders_count(k) > 0 or redis.call('ZCARD', k.q) > 0
  if busy and redis.call('ZCARD', k.q) > 0 and purge_dead_waiters(k, k.q, k.w, now) > 0 then
    busy = holders_count(k) > 0 or redis.call('ZCARD', k.q) > 0
  end
  if busy then
    grant_free(k, name, in_force, A_claim_ms, now, inst, handoff)
    return done('mismatch', R_LIMIT, decimal(in_force))
  end
end
if in_force ~= limit then
  end_bury(k, k.l, limit_text, now)
  redis.call('SET', k.l, A_limit)
  k.fresh = true
end

-- counted: the waiters grant_free counted, while nothing here has changed the queue
local counted = grant_free(k, name, limit, A_claim_ms, now, inst, handoff)
if k.granted then ring_new_watcher(k.q, k.w, name, lease) end
for i = #handoff, 1, -1 do
  if handoff[i].lease == lease then table.remove(handoff, i) end
end

local rec = not fresh and holder_of(k, lease)
if rec and recheck and rec.attach ~= attach then return done('superseded') end
if rec then
  local expires_at = tonumber(redis.call('ZSCORE', k.h, lease))
  if rec.claimed == 0 then
    expires_at = claim(k, lease, rec, now, attach)
  elseif rec.attach ~= attach then
    -- A retry of the request takes the slot over from the attempt before (as
    -- claim does for an unclaimed grant): a give-up of that attempt
    -- (sem_cancel.lua, mode drop with its attach) then answers superseded.
    rec.attach = attach
    redis.call('HSET', k.d, lease, record_json(rec))
  end
  tidy(k, now, keep_ms)
  return granted_reply(lease, rec, expires_at, handoff)
end

local queued = not fresh and redis.call('ZSCORE', k.q, lease)
if known and not queued then return done('ended', R_LEASE, lease) end
local waiter = queued and cjson.decode(redis.call('HGET', k.w, lease) or '{}') or {}
if recheck and waiter.attach and waiter.attach ~= attach then return done('superseded') end

local position = queued and redis.call('ZRANK', k.q, lease)
if not queued then
  local waiting = counted or redis.call('ZCARD', k.q)
  local held = waiting == 0 and holders_count(k)
  if held and held < limit then
    if held == 0 then
      -- The first live holder: the listing may have dropped the name since
      -- the last one (lib_lease.lua index_add). A semaphore with a live
      -- holder or a waiter is in its index already.
      k.fresh = true
      index_add(k, name)
    end
    local reply = grant_now()
    keep_alive(k, now, keep_ms) -- not tidy: the semaphore has a holder now
    return reply
  end
  if not wait then return done('busy', R_WAITING, decimal(waiting)) end
  local max_waiters = tonumber(A_max_waiters)
  if waiting >= max_waiters then
    waiting = waiting - purge_dead_waiters(k, k.q, k.w, now)
    if waiting >= max_waiters then return done('full', R_WAITING, decimal(waiting)) end
  end
  if waiting == 0 then k.fresh = true end
  redis.call('ZADD', k.q, decimal(redis.call('INCR', k.t)), lease)
  position = waiting -- the newest ticket comes last
elseif not wait then
  -- A retry that will not wait finds its request_id's place queued: it leaves the place to the attempt
  -- that waits in it (or keeps it for the next retry) and answers the queue's length.
  keep_alive(k, now, keep_ms)
  return lease_reply('queued', handoff, R_LEASE, lease, R_POSITION, decimal(position), R_HOLDER_PTTL,
                     decimal(first_expiry_in(k, now)), R_WAITING, decimal(redis.call('ZCARD', k.q)))
elseif A_wait == '1' and waiter.inst and waiter.inst ~= inst and waiter.attach ~= attach then
  -- A retry takes the place over from an attempt parked on another gateway: its doorbell tells it at
  -- once, so it looks again and answers superseded (a ring that only wakes, lock_acquire.lua).
  ring_wake(waiter.inst, lease, name)
end
gateway_mark(k, inst, A_mark_ms, now)
if rid ~= '' then rid_keep(k, rid, lease, now + tonumber(A_request_id_ttl_ms), now, true) end
-- since: when the waiter joined the queue, kept over its repeated calls.
local since = queued and waiter.since or now
redis.call('HSET', k.w, lease, waiter_json(inst, attach, A_ttl_ms, A_max_hold_ms, owner, rid, since))
keep_alive(k, now, keep_ms) -- not tidy: with the caller waiting, the semaphore is in use
return lease_reply('queued', handoff, R_LEASE, lease, R_POSITION, decimal(position), R_HOLDER_PTTL,
                   decimal(first_expiry_in(k, now)))
