-- SPDX-License-Identifier: Apache-2.0
-- lib_lease.lua: what every lease script shares, locks and semaphores alike
-- (prepended through "-- uses: lib_lease.lua ..."): the server clock, the
-- guard of the one fence sequence, gateway liveness, request ids, the
-- markers of released leases, the news of ended leases for watchers and the
-- revoked fences.
--
-- Every lease script names every key it touches in KEYS: its own keys first,
-- then the common keys below, from KEYS[KEYS_AT_LIB_LEASE] on (where the build
-- says they start), so Redis ACL key patterns can confine the
-- gateway; the keys built inside a lease script are those a first try moves
-- an end's record and a request id to (end_move, rid_take_first), in the
-- same slot.
-- The names are those of src/store/backend/redis_keys.h; base is the lock's or semaphore's.
-- KEYS: fence fence_limit gateways rids rid_until index ended revoked watched rid_one
--   fence        KEY_FENCE                  the last fence issued
--   fence_limit  KEY_FENCE_LIMIT            the highest fence Postgres has reserved
--   gateways     KEY_GATEWAYS               live gateways: sorted set id -> alive until (ms)
--   rids         base..KEY_SUFFIX_RIDS      hash request_id -> lease id (idempotent retries)
--   rid_until    base..KEY_SUFFIX_RID_UNTIL sorted set request_id -> when it may be forgotten
--   index        KEY_LOCK_INDEX or KEY_SEM_INDEX  the listing index (below)
--   ended        base..KEY_SUFFIX_ENDED     sorted set of "<fence>|<reason>", for retried
--                                           releases and watchers (below)
--   revoked      KEY_REVOKED                the revoked fences (below)
--   watched      base..KEY_SUFFIX_WATCHED   present while a watcher waits (below)
--   rid_one      base..KEY_SUFFIX_RID_ONE   string "<lease id> <request_id>": one request id of
--                                           the name, kept as long as its time to live (below)
-- The facts a lease script's reply may carry (lease_reply, below):
-- REPLY: lease fence ttl expires_at hold_until held_ms again position holder_pttl waiting limit pttl
-- REPLY: left grant granted_at now attach

-- REQUEST_ID_GRACE_MS (src/fglimits.h, put before the script by the build):
-- how long a request_id outlives its lease's expiry (a late retry then answers
-- "ended", not a second lease).

-- The common keys from KEYS[first] on are named by lib_lock.lua's lock_keys
-- and lib_sem.lua's sem_keys, each in the one table constructor of all the
-- keys of its kind (a table filled in later, key by key, grows and rehashes
-- on the way, which costs a script more than some of its commands).

-- An integer as the decimal text a command takes. Redis prints a number
-- argument of redis.call with "%.17g", and Lua's own tostring uses "%.14g":
-- both go through the C library's floating-point printing, many times the
-- cost of this integer format; the hot paths hand over text.
local function decimal(x)
  return string.format('%d', x)
end

-- Redis's own clock in milliseconds: the only clock a lease is measured by.
-- The arithmetic reads TIME's two texts as numbers itself: tonumber() would
-- read each twice (a check, then the conversion), through strtod both times.
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- TIME's two texts (t) as the milliseconds' decimal text: the seconds, then
-- the microseconds without leading zeros, joined; no number read or printed.
local function time_text(t)
  return t[1] .. string.sub('00000' .. t[2], -6, -4)
end

-- now_ms as decimal text (time_text), for a script that only writes the time
-- down (the first tries).
local function now_text()
  return time_text(redis.call('TIME'))
end

-- now_ms and now_text of one look at the clock, for a script that computes
-- with the time and writes it down as well.
local function now_ms_and_text()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000), time_text(t)
end

-- What a renewal at now (ms) gives a hold granted at granted_at for at most
-- max_hold (ms, numbers or decimal text): the time to live (decimal text) of
-- ttl as asked ("0": own_ttl, the lease's own), or of what is left of the hold
-- when that is less (printed only then), the hold's end (ms), and true when
-- the hold's end cut the time to live (the lease then ends at the deadline);
-- a nil time to live when the hold has ended.
local function renewal_ttl(ttl, own_ttl, granted_at, max_hold, now)
  if ttl == '0' then ttl = own_ttl end
  local hold_until = granted_at + max_hold
  if now >= hold_until then return nil, hold_until end
  if now + ttl < hold_until then return ttl, hold_until, false end
  return decimal(hold_until - now), hold_until, true
end

-- The ms a claim of a granted-but-unclaimed lease starts it for at now: its
-- ttl, cut at its hold deadline (granted_at + max_hold, the grant's time and
-- not the claim's), 1 when that has passed; the ttl whole for a record that
-- names no grant time.
local function claim_ttl(ttl, granted_at, max_hold, now)
  if not granted_at then return tonumber(ttl) end
  local capped = renewal_ttl(ttl, ttl, tonumber(granted_at), tonumber(max_hold), now)
  return capped and tonumber(capped) or 1
end

-- True if decimal text a (digits, no leading zero) is a larger number than
-- decimal text b, compared as texts: no number is read.
local function decimal_above(a, b)
  return #a > #b or (#a == #b and a > b)
end

-- Makes key (which exists) live at least until till_text (ms since the epoch
-- on Redis's clock, as decimal text), never shortening its life: one call when
-- it lengthens a time to live (GT), a second one when the key had none yet
-- (NX; GT counts no time to live as forever).
local function keep_until(key, till_text)
  if redis.call('PEXPIREAT', key, till_text, 'GT') == 0 then redis.call('PEXPIREAT', key, till_text, 'NX') end
end

-- The keys of a lock's queue (queue, its waiters' records, its tickets: lib_lock.lua) live until the last of
-- their waiters is past its deadline by a waiter lease, the time its gateway has to act on it, and at most a
-- waiter lease longer, so a queue whose waiters' gateway died with them goes by itself. A waiter joining, and
-- a retry of a request_id taking a place over, needs them need_ms from now on Redis's clock (decimal text:
-- its wait_ms and a waiter lease); keys that have less are given keep_ms (a waiter lease more), so that the
-- joins after this one, which need about as much, find them long enough and pay one PTTL instead of three
-- PEXPIREs until a waiter lease has passed. new: nobody waited before the caller (no queue, no tickets; a
-- leftover waiters' hash goes with them): the keys have no time to live yet and get theirs outright. A queue
-- a gateway from before made keeps none (PTTL -1): its waiters' deadlines are not known. The three keys keep
-- one time to live, so a queue and its tickets go together.
local function queue_keep(queue, waiters, tickets, need_ms, keep_ms, new)
  if not new then
    local left = redis.call('PTTL', queue)
    if left == -1 or left >= tonumber(need_ms) then return end
  end
  redis.call('PEXPIRE', queue, keep_ms)
  redis.call('PEXPIRE', waiters, keep_ms)
  redis.call('PEXPIRE', tickets, keep_ms)
end

-- A string as JSON text, through cjson unless it is empty.
local function json_string(s)
  if s == '' then return '""' end
  return cjson.encode(s)
end

-- An id the gateway made (lowercase hex, or empty) as JSON text: quoted as it
-- is, since it holds nothing to escape.
local function json_id(id)
  return '"' .. id .. '"'
end

-- The record of a waiter in a queue's waiters hash (lib_lock.lua, lib_sem.lua):
-- JSON text {inst, attach, ttl, max_hold, owner, rid, since}, ttl and max_hold
-- (given as decimal text) JSON strings, since (ms) a number. As strings they
-- decode as the text the grant writes into the holder record: as numbers
-- cjson would read them through strtod and the grant print them again. (The
-- record of a gateway from before has them as numbers, which Lua joins into
-- the holder record as their digits all the same.)
local function waiter_json(inst, attach, ttl, max_hold, owner, rid, since)
  return '{"inst":' .. json_id(inst) .. ',"attach":' .. json_id(attach) .. ',"ttl":"' .. ttl .. '","max_hold":"' ..
         max_hold .. '","owner":' .. json_string(owner) .. ',"rid":' .. json_string(rid) .. ',"since":' ..
         decimal(since) .. '}'
end

-- A lease script's reply: the one shape every lua/lock_*.lua and lua/sem_*.lua
-- returns, built here and read by src/lease/lease_answer.c. One text of words
-- separated by single spaces: the outcome r first, then the facts that come
-- with it (up to four), each its code f and its value v, then, per grant handed
-- over in-process (handoff: lib_lock.lua grant_next, lib_sem.lua grant_free,
-- {lease, fence, ttl, expires_at}; nil or empty for none), R_GRANT and those
-- four values. A code is R_<FACT> of the REPLY lines atop this file, which the
-- build numbers for Lua and C (LIB_LEASE_REPLY_<FACT>) alike, spelled with a
-- space each side; it fails a script that names a code they lack. A value is
-- an id, digits, or a number as decimal text (decimal(x): Lua prints a number
-- with "%.14g", slower, and past 10^14 not as digits).
-- Why this shape (docs/performance.md has the figures): a text costs Redis less
-- than an array reply, one concatenation of a fixed number of pieces less than
-- a table of them joined, and no JSON means no escapes, encoder or parser.
-- (lock_status.lua and sem_status.lua answer a document that holds free text,
-- the owners, as JSON through cjson.encode.)
local function lease_reply(r, handoff, f1, v1, f2, v2, f3, v3, f4, v4)
  local out
  if not f1 then
    out = r
  elseif not f2 then
    out = r .. f1 .. v1
  elseif not f3 then
    out = r .. f1 .. v1 .. f2 .. v2
  elseif not f4 then
    out = r .. f1 .. v1 .. f2 .. v2 .. f3 .. v3
  else
    out = r .. f1 .. v1 .. f2 .. v2 .. f3 .. v3 .. f4 .. v4
  end
  if handoff then
    for _, g in ipairs(handoff) do
      out = out .. R_GRANT .. g.lease .. ' ' .. g.fence .. ' ' .. g.ttl .. ' ' .. g.expires_at
    end
  end
  return out
end

-- The fence sequence.
-- KEY_FENCE is the last fence issued; KEY_FENCE_LIMIT the highest fence that
-- Postgres has reserved (fencegate.fence_reservation). A script may start
-- issuing fences only while both exist and the sequence is below the limit;
-- else it answers "nofence" and the gateway reserves the next block in
-- Postgres, so a fence is never issued that Postgres could not remember after
-- Redis loses its data. A gateway that connects to a Redis whose data may have
-- gone back (lease/fence.c) deletes the limit before anything else, so no script
-- of any gateway grants until a reservation made after the loss raised the
-- sequence again. A script that issues several fences may pass the limit by at
-- most the fences it issues (bounded by the largest semaphore limit); recovery
-- after a loss skips that much.

-- True if fences may be issued, given MGET's values of the fence and its limit.
local function fences_left(v)
  return v[1] ~= false and v[2] ~= false and v[1] + 0 < v[2] + 0
end

-- True if fences may be issued now.
local function fence_ready(lk)
  return fences_left(redis.call('MGET', lk.fence, lk.fence_limit))
end

-- fence_ready, and the value of key (or false) read in the same command.
local function fence_ready_and_get(lk, key)
  local v = redis.call('MGET', lk.fence, lk.fence_limit, key)
  return fences_left(v), v[3]
end

-- True if gateway inst marked itself alive and its mark has not run out.
local function gateway_alive(lk, inst, now)
  local till = redis.call('ZSCORE', lk.gateways, inst)
  return till ~= false and tonumber(till) > now
end

-- Marks gateway inst alive in lk.gateways until now + mark_ms, never sooner
-- than it was (on a cluster: the slot's key, whose life then ends with its
-- last mark); mark_ms "" (one Redis: the beat alone marks) does nothing.
local function gateway_mark(lk, inst, mark_ms, now)
  if mark_ms == '' then return end
  local till = decimal(now + tonumber(mark_ms))
  redis.call('ZADD', lk.gateways, 'GT', till, inst)
  keep_until(lk.gateways, till)
end

-- Request ids. A request_id maps to its lease while a retry could still come:
-- until the wait and the lease of its latest request could have ended (the
-- caller's request_id ttl), and, once granted, until REQUEST_ID_GRACE_MS after the
-- lease's expiry, refreshed at grant, claim and renew. Never shortened.
-- A name keeps them in two places. The key rid_one holds one id of a lease
-- granted at once, "<lease> <rid>", whose time is the key's own: Redis forgets
-- it when that is up, and a name whose ids come one at a time (most names: a
-- lock per invoice, say) pays one SET for each. An id that comes while rid_one
-- holds another live one, and a waiter's, go into the set: the hash rids (id
-- -> lease) and the sorted set rid_until (id -> its time), whose lapsed ids are
-- pruned a few at a time. A waiter's grant, its claim and its hand-over then
-- find its id in the set without a look at rid_one. An id is kept in one place
-- only: each new id is looked for in both first, and in the key of its own
-- that a first try moves rid_one's id to when the lease it names is over
-- (rid_take_first): "<rid_one>:<rid>", which the gateway names in the KEYS of
-- every acquire that carries rid (rid_moved).

-- The text rid_one holds for rid mapped to lease.
local function rid_one_text(lease, rid)
  return lease .. ' ' .. rid
end

-- The lease id and the request id of one_text (rid_one's value, or false),
-- or nil. A lease id holds no space, so the id is all after the first one (a
-- value without one was not written by rid_keep or rid_take and maps nothing).
local function rid_one_read(one_text)
  if not one_text then return nil end
  local space = string.find(one_text, ' ', 1, true)
  if not space then return nil end
  return string.sub(one_text, 1, space - 1), string.sub(one_text, space + 1)
end

-- The lease that one_text (rid_one's value, or the value a first try moved
-- from there, or false) maps rid to, or nil.
local function rid_one_lease(one_text, rid)
  local lease, one = rid_one_read(one_text)
  if one ~= rid then return nil end
  return lease
end

-- True if request_id rid ('' for none) may still name a lease in the set: its
-- time in rid_until has not passed.
local function rid_live(rid_until, rid, now)
  if rid == '' then return false end
  local till = redis.call('ZSCORE', rid_until, rid)
  return till ~= false and tonumber(till) > now
end

-- What the set rids maps a waiter's request_id to once its place was given up without a grant
-- (rid_leave): the lease id and this mark after it.
local RID_LEFT = '~'

-- The lease id of request_id rid, or nil; moved: the key rid_one's value
-- moves to for rid (rid_take_first). For an id whose place was given up
-- (rid_leave), nil and the lease id of that place: a new request of rid
-- starts afresh, an attempt that waited in the place learns a retry left it.
local function rid_lease(lk, rid, now, moved)
  if rid == '' then return nil end
  local one = redis.call('MGET', lk.rid_one, moved)
  local lease = rid_one_lease(one[1], rid) or rid_one_lease(one[2], rid)
  if lease then return lease end
  if not rid_live(lk.rid_until, rid, now) then return nil end
  lease = redis.call('HGET', lk.rids, rid)
  if lease == false then return nil end
  if string.sub(lease, -1) == RID_LEFT then return nil, string.sub(lease, 1, -2) end
  return lease
end

-- Forgets up to 16 ids of the keys rids and rid_until whose time is past.
local function rid_prune(rids, rid_until, now)
  local old = redis.call('ZRANGEBYSCORE', rid_until, '-inf', decimal(now), 'LIMIT', '0', '16')
  if #old > 0 then
    redis.call('ZREM', rid_until, unpack(old))
    redis.call('HDEL', rids, unpack(old))
  end
end

-- Maps rid to lease until at least till (ms); an earlier time never shortens
-- it. A waiter's rid (waits) goes into the set. Else, where rid_one maps rid to
-- lease, only its time moves; where rid_one is free and the set has no live
-- rid, rid_one takes it; else the set does.
local function rid_keep(lk, rid, lease, till, now, waits)
  if rid == '' or rid == nil then return end
  if not waits then
    local one_text = redis.call('GET', lk.rid_one)
    if one_text == rid_one_text(lease, rid) then
      redis.call('PEXPIREAT', lk.rid_one, decimal(till), 'GT')
      return
    end
    if not one_text and not rid_live(lk.rid_until, rid, now) then
      redis.call('SET', lk.rid_one, rid_one_text(lease, rid), 'PXAT', decimal(till))
      return
    end
  end
  rid_prune(lk.rids, lk.rid_until, now)
  redis.call('HSET', lk.rids, rid, lease)
  local cur = tonumber(redis.call('ZSCORE', lk.rid_until, rid) or '0')
  if till <= cur then till = cur end
  local till_text = decimal(till)
  if till ~= cur then redis.call('ZADD', lk.rid_until, till_text, rid) end
  keep_until(lk.rids, till_text)
  keep_until(lk.rid_until, till_text)
end

-- Keeps rid of a lease that holds until expires_at (granted, claimed, renewed).
local function rid_hold(lk, rid, lease, expires_at, now)
  rid_keep(lk, rid, lease, tonumber(expires_at) + REQUEST_ID_GRACE_MS, now, false)
end

-- rid_join's part: rid goes into the set. It reads when the set rid_until
-- goes: where it does not exist no id in it is live, and both keys are made
-- anew with their time (no look, no prune); else rid joins the set before the
-- prune, so the set is never emptied and keeps that time, which tells whether
-- it must be lengthened: then both keys are given REQUEST_ID_GRACE_MS more
-- than till, so that the next ids of a name in use, which need about as long,
-- find them long enough (a set from a gateway that kept no time, -1, gets one
-- so); else the hash, whose time is never past the set's (both are given the
-- same times, and the hash's ids are the set's), is given the set's, which it
-- lacks where it was made anew.
local function rid_take_set(rids, rid_until, rid, lease, till, now)
  local goes = redis.call('PEXPIRETIME', rid_until)
  local till_text = decimal(till)
  if goes == -2 then
    redis.call('HSET', rids, rid, lease)
    redis.call('ZADD', rid_until, till_text, rid)
    redis.call('PEXPIREAT', rids, till_text)
    redis.call('PEXPIREAT', rid_until, till_text)
    return true
  end
  if not redis.call('ZADD', rid_until, 'NX', 'INCR', till_text, rid) then
    if tonumber(redis.call('ZSCORE', rid_until, rid)) > now then return false end
    redis.call('ZADD', rid_until, till_text, rid)
  end
  rid_prune(rids, rid_until, now)
  redis.call('HSET', rids, rid, lease)
  if till > goes then
    local keep_text = decimal(till + REQUEST_ID_GRACE_MS)
    redis.call('PEXPIREAT', rids, keep_text)
    redis.call('PEXPIREAT', rid_until, keep_text)
  else
    redis.call('PEXPIREAT', rids, decimal(goes))
  end
  return true
end

-- A new request's rid (never '': the lean scripts call it only with a
-- request_id, and reckon no time without one) in a lean queue join, for
-- lease: one_text and moved_text are the values of the key rid_one and of the
-- key a first try moves its value to for rid (or false), which the script
-- read with its first keys. False, writing nothing, where rid is live (a
-- retry, which the full script answers with its lease or whose place it takes
-- over); else maps rid to lease in the set until till (ms) and answers true.
local function rid_join(rids, rid_until, one_text, moved_text, rid, lease, till, now)
  if rid_one_lease(one_text, rid) or rid_one_lease(moved_text, rid) then return false end
  return rid_take_set(rids, rid_until, rid, lease, till, now)
end

-- True if rid is live in the set rid_until: one look at whether the set
-- exists (set_exists: true or false where the caller asked, rid_busy_look;
-- nil to ask here), and only then at its score of rid.
local function rid_in_set(rid_until, rid, now, set_exists)
  if set_exists == nil then set_exists = redis.call('PEXPIRETIME', rid_until) ~= -2 end
  return set_exists and rid_live(rid_until, rid, now)
end

-- True if rid is kept outside rid_one: in the key a first try moved it to
-- (moved_text: that key's value, or false) or live in the set (rid_in_set).
local function rid_kept_aside(moved_text, rid_until, rid, now, set_exists)
  return rid_one_lease(moved_text, rid) ~= nil or rid_in_set(rid_until, rid, now, set_exists)
end

-- rid_join for the try beside a semaphore's holders, which grants at once (rid
-- never '', as there), whose lease id is the first word of lease_text: where
-- rid_one is free and rid is in neither the set nor a moved key, one SET of
-- rid_one; where rid_one holds another id, of a lease that may hold still, the
-- set takes rid.
local function rid_take(rids, rid_until, rid_one, one_text, moved_text, rid, lease_text, till, now, set_exists)
  local lease = string.match(lease_text, '^[^ ]+')
  if one_text then return rid_join(rids, rid_until, one_text, moved_text, rid, lease, till, now) end
  if rid_kept_aside(moved_text, rid_until, rid, now, set_exists) then return false end
  redis.call('SET', rid_one, rid_one_text(lease, rid), 'PXAT', decimal(till))
  return true
end

-- rid_take for a first try, which grants only on a free lock or an idle
-- semaphore: there an id rid_one holds is of a lease that is over, which no
-- renewal moves again, so it moves with its time to live to a key of its own,
-- "<rid_one>:<id>" (KEY_MOVED, made here: in the slot, and local on a Redis
-- Cluster for end_move's reason), where the looks for it read it, and rid_one
-- takes rid: one RENAME where the set would cost four commands and a prune.
local function rid_take_first(rid_until, rid_one, one_text, moved_text, rid, lease_text, till, now, set_exists)
  local _, one = rid_one_read(one_text)
  if one == rid or rid_kept_aside(moved_text, rid_until, rid, now, set_exists) then return false end
  if one then redis.call('RENAME', rid_one, rid_one .. KEY_MOVED .. one) end
  redis.call('SET', rid_one, rid_one_text(string.match(lease_text, '^[^ ]+'), rid), 'PXAT', decimal(till))
  return true
end

-- For a lean try that grants at once only where none of the keys given last
-- exists (a semaphore's holders and queue), and that is to look at the
-- request-id set rid_until (rid_take: a request_id given, the key rid_one
-- free): whether one of the keys exists, and whether the set does (nil where
-- one of the keys does), in one EXISTS of them all where none does. EXISTS
-- counts the keys, not which: where it counts one, a second EXISTS tells.
-- A call that asks nothing of the set runs its own EXISTS: through this
-- function (a call with a variable count of arguments) it cost a semaphore
-- pair 1,700 Redis instructions more (docs/performance.md).
local function rid_busy_look(rid_until, ...)
  local n = redis.call('EXISTS', rid_until, ...)
  if n == 0 then return false, false end
  if n > 1 then return true, nil end
  local set_exists = redis.call('EXISTS', rid_until) == 1
  return not set_exists, set_exists
end

-- For a try that takes a slot beside a semaphore's holders (sem_acquire_more.lua,
-- sem_acquire_queue.lua): whether anybody queues (the key queue exists) and,
-- for a request_id rid ('' for none) while the one-id key is free (one_text:
-- its value as read), whether the request-id set rid_until exists, which
-- rid_take looks at then: one EXISTS either way (rid_busy_look).
local function queue_busy_look(rid_until, queue, rid, one_text)
  if rid ~= '' and not one_text then return rid_busy_look(rid_until, queue) end
  return redis.call('EXISTS', queue) == 1, nil
end

-- Keeps rid of a lease granted to a waiter, or claimed, until expires_at: the
-- waiter's join mapped rid to it in the set until its wait and lease could
-- have ended (rid_keep, rid_join), a grant or claim since until the lease's
-- end and REQUEST_ID_GRACE_MS more, so rid is never pruned while it can hold or
-- wait and only its time moves, never back (ZADD GT), without rid_keep's prune
-- and look. Where rid is still in the set, the keys exist with a time to live
-- (rid_keep and rid_join give them one), which a PEXPIREAT GT lengthens where
-- it falls short, with no second call (keep_until's NX) where it does not.
-- Where the ZADD added rid (a waiter granted after its id's time passed: the
-- set may have gone and been made anew), keep_until gives a key with no time
-- one.
local function rid_extend_set(lk, rid, expires_at)
  if rid == '' or rid == nil then return end
  local till_text = decimal(tonumber(expires_at) + REQUEST_ID_GRACE_MS)
  if redis.call('ZADD', lk.rid_until, 'GT', till_text, rid) == 1 then
    keep_until(lk.rids, till_text)
    keep_until(lk.rid_until, till_text)
    return
  end
  redis.call('PEXPIREAT', lk.rids, till_text, 'GT')
  redis.call('PEXPIREAT', lk.rid_until, till_text, 'GT')
end

-- rid_extend_set for a renewal of lease, whose rid rid_one may hold: there
-- its time moves.
local function rid_extend(lk, rid, lease, expires_at)
  if rid == '' or rid == nil then return end
  if redis.call('GET', lk.rid_one) == rid_one_text(lease, rid) then
    redis.call('PEXPIREAT', lk.rid_one, decimal(tonumber(expires_at) + REQUEST_ID_GRACE_MS), 'GT')
    return
  end
  rid_extend_set(lk, rid, expires_at)
end

-- True if rid, in the set of request ids, still names lease; an id kept alone in the one-id key
-- that names it is deleted there first (false then: nothing more to do).
local function rid_set_names(lk, rid, lease)
  if rid == '' or rid == nil then return false end
  if redis.call('GET', lk.rid_one) == rid_one_text(lease, rid) then
    redis.call('DEL', lk.rid_one)
    return false
  end
  return redis.call('HGET', lk.rids, rid) == lease
end

-- Forgets rid if it still names lease, which holds or waits still (a grant
-- never answered, a dead gateway's waiter): its id was never moved away
-- (rid_take_first moves only an id whose lease is over).
local function rid_forget(lk, rid, lease)
  if not rid_set_names(lk, rid, lease) then return end
  redis.call('HDEL', lk.rids, rid)
  redis.call('ZREM', lk.rid_until, rid)
end

-- A waiter of lease with request_id rid gives its place up without a grant (its deadline, its
-- client gone, a lock set's retry dropping it): an attempt could still wait under rid on another
-- gateway, whose place a retry took over and has now left. rid keeps naming the place, marked
-- (RID_LEFT), until its time in rid_until: that attempt, looking again, answers superseded, where
-- one whose place was dropped with a dead gateway's waiters (rid_forget) queues anew at the back.
-- One HSET, where rid_forget costs an HDEL and a ZREM; the prune takes the mark with its time.
local function rid_leave(lk, rid, lease)
  if not rid_set_names(lk, rid, lease) then return end
  redis.call('HSET', lk.rids, rid, lease .. RID_LEFT)
end

-- Takes the oldest waiter whose gateway is alive out of the queue k.q and its
-- record out of k.w, dropping waiters of dead gateways on the way (and
-- forgetting their request_ids). Returns its lease id and decoded record, or
-- nil when nobody alive waits. k is a lock's or a semaphore's key table; inst
-- (or nil): the calling gateway, alive since it runs the script, whose waiters
-- need no look at its mark.
local function next_live_waiter(k, now, inst)
  while true do
    local head = redis.call('ZPOPMIN', k.q)[1]
    if not head then return nil end
    local raw = redis.call('HGET', k.w, head)
    redis.call('HDEL', k.w, head)
    if raw then
      local w = cjson.decode(raw)
      if w.inst == inst or gateway_alive(k, w.inst, now) then return head, w end
      rid_forget(k, w.rid, head)
    end
  end
end

-- Waiters whose clients hung up leave the queue (k.q, k.w) together: packed is
-- a run of 64-byte records (lease id, attach id), holds(lease) tells a lease that
-- holds already (a grant came first: it is given up on its own, by the cancel
-- script). Returns one character per record: '1' gone (or superseded), '0' holds.
local function leave_queue(k, packed, holds)
  local left = {}
  for i = 1, #packed, 64 do
    local lease, attach = string.sub(packed, i, i + 31), string.sub(packed, i + 32, i + 63)
    local out = '1'
    if holds(lease) then
      out = '0'
    else
      local raw = redis.call('HGET', k.w, lease)
      local w = raw and cjson.decode(raw)
      if w and w.attach == attach then
        rid_leave(k, w.rid, lease)
        redis.call('ZREM', k.q, lease)
        redis.call('HDEL', k.w, lease)
      end
    end
    left[#left + 1] = out
  end
  return table.concat(left)
end

-- Drops every waiter (queue q, waiter hash w) whose gateway is dead, and
-- forgets their request ids. Returns how many were dropped.
local function purge_dead_waiters(lk, q, w, now)
  local all = redis.call('HGETALL', w)
  local dropped = 0
  for i = 1, #all, 2 do
    local rec = cjson.decode(all[i + 1])
    if not gateway_alive(lk, rec.inst, now) then
      redis.call('ZREM', q, all[i])
      redis.call('HDEL', w, all[i])
      rid_forget(lk, rec.rid, all[i])
      dropped = dropped + 1
    end
  end
  return dropped
end

-- Ended leases, for retried releases and for watchers: lk.ended is one sorted
-- set of "<fence>|<reason>" (reason released or revoked; a lease that ends
-- unmarked expired; max_hold: a renewal cut it at its hold deadline,
-- mark_hold_end), each scored by minus until when it is kept (ms), so the
-- newest comes first: Redis keeps a set of up to 128 entries as a listpack,
-- whose insert reads the scores from the front until the new one's place
-- (every score, for an until past all the others'). An end is kept by time,
-- not by count: a released lease until the later of its own ttl and the kept
-- time after its release, so a retried release answers 200 again however many
-- leases were released meanwhile. Entries of gateways from before this set
-- was one, scored by minus their fence, are read by watchers alike and go
-- with the first trim. (The last end may wait in an end's record, end_text,
-- and an end's record a first try wrote over in a key of its own: end_move.)
-- While the lock or semaphore is watched every end is also published on
-- channel CHANNEL_ENDED as "<kind>|<fence>|<reason>|<name>", so that every
-- gateway wakes its watchers at once. "Watched" is the key lk.watched, which a
-- watch script sets, with a time to live longer than the watchers' re-check
-- interval, in the same step as it looks at the lease: an end after that look
-- is published, one before it is what the look finds. Ends nobody watches
-- wake no gateway.

-- The ended set of a lease name used again and again is trimmed by the end
-- of one lease in TRIM_EVERY, the one whose fence is a multiple of it (fences
-- of one name grow), not by every end: it holds at most 2 (TRIM_EVERY - 1)
-- entries past their time in between (a lease files its hold end, then its
-- release or revoke).
local TRIM_EVERY = 16

-- LEASE_RELEASED_KEPT_MS (src/fglimits.h) as decimal text: how long a release
-- is answered again at least (the scripts that take it as marker_ms get the same).
-- Made at load, where a library sees no globals (string.format): an integer
-- below 10^14 concatenates as its decimal digits.
local RELEASED_KEPT = LEASE_RELEASED_KEPT_MS .. ''

-- Keeps the end of the lease with fence (a number or decimal text) for
-- reason until till (ms, a number), which is printed once: the entry's score
-- and the set's expiry (keep_until).
local function end_keep(lk, fence, reason, now, till)
  if fence % TRIM_EVERY == 0 then
    redis.call('ZREMRANGEBYSCORE', lk.ended, '-' .. decimal(now), '+inf')
  end
  local till_text = decimal(till)
  redis.call('ZADD', lk.ended, '-' .. till_text, fence .. '|' .. reason)
  keep_until(lk.ended, till_text)
end

-- A renewal that the hold's deadline hold_until (ms, a number) cut: the lease
-- with fence (decimal text) ends at the deadline, which the ended set keeps as
-- "<fence>|max_hold" until RELEASED_KEPT past it, so that a renewal after the
-- lease ended there is told the deadline passed, not that the lease was lost
-- (lease_gone.lua). Watchers and retried releases ask for other entries.
local function mark_hold_end(lk, fence, hold_until, now)
  end_keep(lk, fence, 'max_hold', now, hold_until + LEASE_RELEASED_KEPT_MS)
end

-- A renewal that shortened the lease with fence (a ttl asked below an earlier
-- renewal's): it no longer lasts to the deadline an earlier renewal may have
-- marked (mark_hold_end), so the mark goes.
local function hold_end_drop(lk, fence)
  redis.call('ZREM', lk.ended, fence .. '|max_hold')
end

-- Moves the expiry of string key, which holds the lease with fence (a lock's
-- holder, a semaphore's first holder), to ttl (ms, decimal text) from now for
-- a renewal: lengthening it, as renewals do, costs one PEXPIRE; one that
-- shortens it drops the lease's hold end mark (hold_end_drop), and one in the
-- millisecond of the renewal before, which moves nothing, costs two. cut,
-- hold_until: what renewal_ttl answered, whose mark this files.
local function renew_expiry(lk, key, ttl, fence, cut, hold_until, now)
  if redis.call('PEXPIRE', key, ttl, 'GT') == 0 and redis.call('PEXPIRE', key, ttl, 'LT') == 1 and
      not cut then
    hold_end_drop(lk, fence)
  end
  if cut then mark_hold_end(lk, fence, hold_until, now) end
end

-- The end of a lease kept in one string key (a lock's holder key, an idle
-- semaphore's limit key) after a release or revoke, for as long as the key
-- lives (its time to live is how long the end is kept) and no longer, so that
-- an uncontended release writes one key and asks Redis no time:
-- "~<lease> <fence> <reason>", reason released or revoked. (Gateways before
-- wrote the end's time and keep time after it; such a record reads the same.)
-- A first try that writes over it moves it to a key of its own first
-- (end_move), a full script copies it into the ended set (end_bury).
local function end_text(lease, fence, reason)
  return '~' .. lease .. ' ' .. fence .. ' ' .. reason
end

-- True if raw, a string key's value as read, is an end's record (end_text).
local function is_end(raw)
  return string.byte(raw, 1) == 126 -- '~'
end

-- The lease, fence and reason (all text) of an end's record raw, or nil when
-- raw is none (false, or another value).
local function end_read(raw)
  if not raw then return nil end
  return string.match(raw, '^~(%x+) (%d+) (%a+)')
end

-- Copies the end's record raw, the value of key as read before the key is
-- written over (nothing happens for anything else), into the ended set until
-- the key was to expire.
local function end_bury(lk, key, raw, now)
  if not raw or not is_end(raw) then return end
  local _, fence, reason = end_read(raw)
  if not fence then return end
  local till = redis.call('PEXPIRETIME', key)
  if till <= now then till = now + 1 end
  end_keep(lk, fence, reason, now, till)
end

-- Moves the end's record raw, the value of key as read before a first try
-- (lock_acquire_fast.lua, sem_acquire_fast.lua) writes over it, with its time
-- to live, to "<key>:<fence>" (KEY_MOVED): one RENAME where end_bury costs
-- three commands and a key named in KEYS. Retried releases and watches name
-- that key in their KEYS (the gateway knows the fence); the first try, which
-- does not know it, makes it here. On a Redis Cluster it is still local: it is
-- in key's slot (the name's tag comes first), and a first try grants only
-- while one of the several keys it names is missing (the tickets; the holders
-- and the queue), and Redis admits no call of several keys with one missing to
-- a slot that is moving (ASK, TRYAGAIN), so no record moves while its slot
-- does. The full scripts, which may run then with every key of theirs
-- present, file the end in the ended set.
local function end_move(key, raw)
  local _, fence = end_read(raw)
  if fence then redis.call('RENAME', key, key .. KEY_MOVED .. fence) end
end

-- The reason (text) of the end whose record end_move moved to key moved, or
-- nil when none was moved there or it is no longer kept.
local function moved_end_reason(moved)
  local _, _, reason = end_read(redis.call('GET', moved))
  return reason
end

-- True if the lease with fence (decimal text), whose end's record a first try
-- may have moved to the key moved (end_move), was released and is still kept.
local function was_released(lk, moved, fence, now)
  local reason = moved_end_reason(moved)
  if reason then return reason == 'released' end
  local till = redis.call('ZSCORE', lk.ended, fence .. '|released')
  return till ~= false and -till > now
end

-- Publishes msg on channel. On a Redis Cluster the keys shared by all leases
-- are those of the script's slot, "<key>:{T}" (src/lease/lease_keys.h, every
-- script that publishes names one: the listing index at least), and a script
-- may publish only to a shard channel of its slot: msg goes to channel:{T},
-- which every gateway follows on the slot's primary (SSUBSCRIBE, one channel
-- per slot). On one Redis no key ends so, and msg goes to channel itself. A
-- key of the lease's own carries the name's tag first, and may end with a
-- request id of any text (rid_moved): no such key is taken for a shared one.
local function publish(channel, msg)
  for i = #KEYS, 1, -1 do
    local tag = string.match(KEYS[i], '^[^{]*:({%d+})$')
    if tag then
      redis.call('SPUBLISH', channel .. ':' .. tag, msg)
      return
    end
  end
  redis.call('PUBLISH', channel, msg)
end

-- Wakes the attempt parked under lease (of name) on gateway inst, so that it looks again: a ring that
-- grants nothing ("w|", lib_lock.lua), which a gateway where nobody waits under the lease ignores.
local function ring_wake(inst, lease, name)
  publish(CHANNEL_BELL_PREFIX .. inst, 'w|' .. lease .. '|' .. name)
end

-- The waiters at the head of a queue that look again when the holder's lease
-- ends (src/lease/lease_wait.c EXPIRY_WATCHERS); those further back look at
-- their poll.
local EXPIRY_WATCHERS = 3

-- A grant made at a look, not at a release (the holder's lease ran out), moved
-- every waiter of queue q (records in w) one place up unrung: the one now last
-- among the EXPIRY_WATCHERS looked last from further back and would learn its
-- turn only at its poll, so that a chain of holders that never release (crashed
-- clients) stalls there. Its doorbell tells it, unless it is the caller (lease),
-- which learns its place from its own answer.
local function ring_new_watcher(q, w, name, lease)
  local at = EXPIRY_WATCHERS - 1
  local waiter = redis.call('ZRANGE', q, at, at)[1]
  if not waiter or waiter == lease then return end
  local inst = string.match(redis.call('HGET', w, waiter) or '', '^{"inst":"(%x+)"')
  if inst then ring_wake(inst, waiter, name) end
end

-- Tells every gateway's watchers of kind's name that the lease with fence
-- (decimal text) ended.
local function publish_end(kind, name, fence, reason)
  publish(CHANNEL_ENDED, kind .. '|' .. fence .. '|' .. reason .. '|' .. name)
end

-- The end's record of the lease with record h (lib_holder.lua holder_read or
-- holder_brief) for reason, and how long it is kept (ms, decimal text):
-- keep_text or, for a release, the lease's ttl if that is longer.
local function holder_end_text(h, reason, keep_text)
  if reason == 'released' and decimal_above(h.ttl, keep_text) then keep_text = h.ttl end
  return end_text(h.lease, h.fence, reason), keep_text
end

-- Ends the lease with record h kept in one string key hkey (a lock's holder
-- key, a semaphore's limit key holding its first holder) for reason: its end's
-- record (holder_end_text) replaces it; published when kind's ("l" or "s")
-- name is watched (watched: the mark as read).
local function holder_end(kind, hkey, name, h, reason, keep_text, watched)
  local text, keep = holder_end_text(h, reason, keep_text)
  redis.call('SET', hkey, text, 'PX', keep)
  if watched then publish_end(kind, name, h.fence, reason) end
end

-- Keeps the end at now of the lease with fence (a number or decimal text) for
-- reason until till (ms, a number) and tells the watchers of
-- kind's name, if any (watched: the mark as the caller read it, or nil to
-- look here).
local function mark_ended(lk, kind, name, fence, reason, now, till, watched)
  if type(fence) == 'number' then fence = decimal(fence) end
  end_keep(lk, fence, reason, now, till)
  if watched == nil then watched = redis.call('EXISTS', lk.watched) == 1 end
  if watched then publish_end(kind, name, fence, reason) end
end

-- mark_ended for a release at now, kept for the longer of keep and ttl (ms,
-- decimal text both, compared as texts: no sum printed), watched as there.
local function mark_released(lk, kind, name, fence, now, keep, ttl, watched)
  if decimal_above(ttl, keep) then keep = ttl end
  mark_ended(lk, kind, name, fence, 'released', now, now + keep, watched)
end

-- Marks the lock or semaphore whose ended-news key is watched as watched for
-- at least mark_ms (decimal text): its ends are published until then
-- (mark_ended). A mark that lasts longer (a gateway of a longer poll_ms set it)
-- is kept, so that its watchers hear the news till the end of it.
local function mark_watched(watched, mark_ms)
  if mark_ms == '0' then return end
  if redis.call('PTTL', watched) < tonumber(mark_ms) then
    redis.call('SET', watched, '1', 'PX', mark_ms)
  end
end

-- How the lease with fence (decimal text) ended, read from its end's record
-- in the key moved (end_move) or from the ended set.
local function ended_reason(ended, moved, fence)
  local reason = moved_end_reason(moved)
  if reason then return reason end
  local at = redis.call('ZMSCORE', ended, fence .. '|released', fence .. '|revoked')
  if at[1] then return 'released' end
  if at[2] then return 'revoked' end
  return 'expired'
end

-- Revoked fences: the set KEY_REVOKED mirrors fencegate.revocations and
-- always holds the member "0" once built, so a set that is missing means Redis
-- lost it: the script answers "norevoked" and the gateway rebuilds it from
-- Postgres before running the script again.
local function revoked_ready(lk)
  return redis.call('EXISTS', lk.revoked) == 1
end

-- The listing index (lease_list.lua): KEY_LOCK_INDEX (locks) and KEY_SEM_INDEX
-- (semaphores), sorted sets of names all scored 0, read in name order with
-- ZRANGEBYLEX. Every acquire that takes or queues adds its name, so a lock or
-- semaphore that is held or has waiters is always in its index; a name is
-- removed only by a script that sees it idle (a release, or a listing passing
-- over it), so the index holds live names plus the few whose last lease
-- expired unreleased.
local function index_add(lk, name)
  redis.call('ZADD', lk.index, '0', name)
end

local function index_drop_if_idle(lk, name, idle)
  if idle then redis.call('ZREM', lk.index, name) end
end
