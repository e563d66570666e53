-- uses: lib_lease.lua lib_holder.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_acquire.lua: one acquire attempt on lock N, first or repeated.
-- KEYS: lib_lock.lua rid_moved
--   rid_moved: the request's own id's key a first try moves rid_one's value to
--   (lib_lease.lua rid_take_first), the last
-- ARGV: name lease request_id ttl_ms max_hold_ms owner wait instance attach claim_ms
-- ARGV: max_waiters request_id_ttl_ms mark_ms queue_ms queue_keep_ms
--   lease: an id no call named before, or with wait "again" the id of a queued attempt
--   looking again; either gives way to the id this request already has; request_id: ""
--   for none; wait: "1" to queue, "0" not to, "again" to queue as an attempt looking
--   again; instance: the gateway's id; attach: the asking connection's id
--   mark_ms: a caller that waits marks its gateway alive that long in the lease's slot
--   (lib_lease.lua gateway_mark: on a cluster), "" for no mark
--   queue_ms: the caller's wait_ms and waiter lease: how long from now the queue's keys live at least
--   once it joins or, with wait "1", takes over a place by its request_id; queue_keep_ms: a waiter lease
--   more, what they are given when they have less (lib_lease.lua queue_keep)
-- Returns (lib_lease.lua lease_reply):
--   granted {lease, fence, ttl, expires_at}  the caller holds the lock
--   queued  {lease, position, holder_pttl}   the caller waits in the queue; with wait "0" (a retry
--                                            whose request_id's place is queued, left as it is)
--                                            {lease, position, waiting, attach}: the queue's length
--                                            and the connection waiting in the place (none for a
--                                            record without one), which a lock set's retry names as
--                                            it drops that place (lock_cancel.lua, mode place)
--   busy    {waiting}                        not free and the caller will not wait
--   full    {waiting}                        the queue is at max_waiters (waiters of
--                                            dead gateways are dropped first)
--   ended   {lease}                          this request_id's lease is over
--   superseded {}                            a retry of the request took the lease (or its place in
--                                            the queue) over from this attempt, which looks again (or
--                                            took its place over and gave it up: lib_lease.lua rid_leave)
--   nofence {}                               no fence may be issued (lib_lease.lua)
local name, lease, rid = A_name, A_lease, A_request_id

-- The fence sequence, the holder key and the tickets (is anybody waiting?) in one read.
local v = redis.call('MGET', KEYS[AT_FENCE], KEYS[AT_FENCE_LIMIT], KEYS[AT_HOLDER], KEYS[AT_TICKETS])
if not fences_left(v) then return lease_reply('nofence') end
local now = now_ms()
local prior, waiting = v[3], v[4]
local h = holder_read(prior)
-- listed: a lock with a live holder is in the listing index (each grant and queue join puts it there, and a
-- listing drops only names with neither holder nor waiter: lease_list.lua).
local listed = h ~= nil
if h then
  prior = false -- a live holder is never kept in the history
elseif prior and not is_end(prior) then
  -- A record of no layout this script reads (a newer gateway's, while gateways are replaced) still
  -- holds the lock: it is never taken for free, and holds until its key expires.
  h, prior = {}, false
end
local k -- lock_keys(), made only where more than the uncontended path's keys are needed

local known = false
local place_left -- the lease of a place under rid given up without a grant (lib_lease.lua rid_leave)
-- recheck: the caller names the lease its request_id already has, so it is an attempt looking again (a
-- retry names a fresh id). One whose lease a retry took over (another connection is named) leaves it to
-- the retry: taking it back would let its give-up (lock_cancel.lua, drop with its attach) release what
-- the retry was answered, as a lock set's earlier attempt on another gateway did.
local recheck = false
if rid ~= '' then
  k = lock_keys()
  local before, left = rid_lease(k, rid, now, KEYS[#KEYS])
  place_left = left
  known = before ~= nil
  recheck = known and before == lease
  if known then lease = before end
end

-- fresh: an id no call named before does not wait in the queue, so it is not looked up there.
local again = A_wait == 'again'
local fresh = not again and not known

if h and h.lease == lease then
  if recheck and h.attach ~= A_attach then return lease_reply('superseded') end
  local expires_at
  if h.claimed == '0' then
    expires_at = holder_claim(k or lock_keys(), h, now, A_attach)
  else
    -- A retry of the request takes the holder over from the attempt before
    -- (as holder_claim does for an unclaimed grant): a give-up of that attempt
    -- (lock_cancel.lua, mode drop with its attach) then answers superseded.
    if h.attach ~= A_attach then
      redis.call('SET', KEYS[AT_HOLDER], holder_rewrite(h, h.claimed, A_attach), 'KEEPTTL')
    end
    expires_at = now + redis.call('PTTL', KEYS[AT_HOLDER])
  end
  return holder_granted_reply(h, expires_at)
end

-- Takes the free lock, nobody waiting: the uncontended case.
local function take()
  if known then return lease_reply('ended', nil, R_LEASE, lease) end
  redis.call('ZADD', KEYS[AT_INDEX], '0', name)
  local fence = decimal(redis.call('INCR', KEYS[AT_FENCE]))
  if prior then end_bury(k or lock_keys(), KEYS[AT_HOLDER], prior, now) end
  redis.call('SET', KEYS[AT_HOLDER], holder_text(lease, fence, A_ttl_ms, A_max_hold_ms, decimal(now), '1', A_instance,
                                                 A_attach, rid, A_owner), 'PX', A_ttl_ms)
  if rid ~= '' then rid_hold(k, rid, lease, now + A_ttl_ms, now) end
  return lease_reply('granted', nil, R_LEASE, lease, R_FENCE, fence,
                     R_TTL, A_ttl_ms, R_EXPIRES_AT, decimal(now + A_ttl_ms))
end

-- An attempt looking again whose place was given up under its request_id lost it to a retry of the
-- request, which took it over and gave it up (a timeout, a lock set's retry that would not wait): it
-- answers superseded, never queues again at the back. One whose place was dropped with a dead gateway's
-- waiters (its gateway only looked dead: a missed beat) has no such mark and queues anew.
if again and place_left == lease then return lease_reply('superseded') end
if not h and not waiting then return take() end
k = k or lock_keys()

-- In use, or waited for: the numbers only this path reads.
local wait = again or A_wait == '1'
local claim_ms, max_waiters, rid_ttl = tonumber(A_claim_ms), tonumber(A_max_waiters), tonumber(A_request_id_ttl_ms)
local queued = not fresh and redis.call('ZSCORE', k.q, lease)
if known and not queued then return lease_reply('ended', nil, R_LEASE, lease) end
local waiter = queued and cjson.decode(redis.call('HGET', k.w, lease) or '{}') or {}
if recheck and waiter.attach and waiter.attach ~= A_attach then return lease_reply('superseded') end
-- A waiter's gateway is marked before anything is granted, so a re-check never
-- takes its own caller for a dead gateway's waiter.
if queued and wait then gateway_mark(k, A_instance, A_mark_ms, now) end

if not h then
  local granted = grant_next(k, name, claim_ms, now, nil, nil, prior, true) -- fences_left(v) held above
  if granted then ring_new_watcher(k.q, k.w, name, lease) end
  if granted == lease then
    local mine = holder_read(redis.call('GET', k.h))
    if recheck and mine.attach ~= A_attach then return lease_reply('superseded') end
    return holder_granted_reply(mine, holder_claim(k, mine, now, A_attach))
  end
  if granted then h, listed = true, true end
  -- grant_next drops the waiters of gateways it takes for dead: this caller's own lease too when its
  -- gateway's mark lapsed, its request_id forgotten with it. The caller, alive after all, then arrives
  -- anew (as in sem_acquire.lua), not told its lease ended.
  if queued then
    queued = redis.call('ZSCORE', k.q, lease)
    if not queued then known = false end
  end
  if known and not queued then return lease_reply('ended', nil, R_LEASE, lease) end
  if not granted and not queued then return take() end
end

local position = queued and redis.call('ZRANK', k.q, lease)
if not queued then
  local count = redis.call('ZCARD', k.q)
  if not wait then return lease_reply('busy', nil, R_WAITING, decimal(count)) end
  if count >= max_waiters then
    count = count - purge_dead_waiters(k, k.q, k.w, now)
    queue_settled(k)
    if count >= max_waiters then return lease_reply('full', nil, R_WAITING, decimal(count)) end
  end
  -- A waiter in the queue keeps the lock in the index: only the first joins it, and only when no live holder
  -- keeps it there.
  if count == 0 and not listed then index_add(k, name) end
  redis.call('ZADD', k.q, redis.call('INCR', k.t), lease)
  gateway_mark(k, A_instance, A_mark_ms, now)
  position = count -- the newest ticket comes last
elseif not wait then
  -- A retry that will not wait finds its request_id's place queued: it leaves the place to the attempt
  -- that waits in it (or keeps it for the next retry, kept_place.h) and answers the queue's length and
  -- the connection waiting there, so that a lock set's retry drops that attempt's place alone.
  local seen = waiter.attach
  return lease_reply('queued', nil, R_LEASE, lease, R_POSITION, decimal(position),
                     R_WAITING, decimal(redis.call('ZCARD', k.q)), seen and seen ~= '' and R_ATTACH or nil, seen)
elseif A_wait == '1' and waiter.inst and waiter.inst ~= A_instance and waiter.attach ~= A_attach then
  -- A retry takes the place over from an attempt parked on another gateway: its doorbell tells it at
  -- once, so it looks again and answers superseded (the retry's own gateway tells one parked there).
  -- The ring only wakes ("w|", lib_lock.lua): it is no grant, so a gateway where nobody waits under
  -- the lease (a kept place's) ignores it rather than give back as an orphan what the retry is granted.
  ring_wake(waiter.inst, lease, name)
end
rid_keep(k, rid, lease, now + rid_ttl, now, true)
-- since: when the waiter joined the queue, kept over its repeated calls.
local since = queued and waiter.since or now
redis.call('HSET', k.w, lease, waiter_json(A_instance, A_attach, A_ttl_ms, A_max_hold_ms, A_owner, rid, since))
-- The queue lives until the caller's deadline has passed, from its join on or from a retry taking its place
-- over (its wait starts anew); a look again leaves it alone. A join at position 0 makes the queue.
if not queued or A_wait == '1' then
  queue_keep(k.q, k.w, k.t, A_queue_ms, A_queue_keep_ms, not queued and position == 0)
end
-- holder_pttl: -2 when no lease holds (the key holds an end's record, or nothing).
return lease_reply('queued', nil, R_LEASE, lease, R_POSITION, decimal(position),
                   R_HOLDER_PTTL, decimal(h and redis.call('PTTL', k.h) or -2))
