-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_renew.lua: a holder extends its lease on semaphore N; the fence stays the same.
-- max_hold_ms caps the hold: the new expiry is min(now + ttl, hold_until).
-- It names only the keys a renewal touches (Redis hands each key of a call to
-- Lua at a price): the semaphore's own, whose times to live it keeps past the
-- new expiry, and the request ids. It touches its own holder alone: expired
-- holders and the slots they free are left to the next acquire, release or
-- give-up, and to the waiters, which look again when the earliest holder's
-- lease ends (lib_sem.lua). A first holder in the limit key, claimed as the
-- first try grants it, is renewed where it is, as a lock's holder is: only
-- the limit key's time to live moves (it is the semaphore's only key then, and
-- expires with the lease), and its request_id's time (lib_lease.lua
-- rid_extend). Any other first holder moves into the holders' keys first
-- (lib_sem_life.lua unfold). A claimed holder's record stays as it is, only
-- its expiry moves; the time to live is the ttl as asked unless the hold's
-- deadline cuts it (no sum printed); a renewal the deadline cuts keeps the
-- hold's end in the ended set, and one that shortens the lease drops it
-- (lib_lease.lua renew_expiry).
-- KEYS: holders data queue waiters limit tickets rids rid_until ended rid_one
--   those keys of lib_sem.lua and lib_lease.lua
-- ARGV: lease ttl_ms keep_ms
--   ttl_ms "0": the lease's own ttl
-- Returns (lib_lease.lua lease_reply): renewed {fence, ttl, now, hold_until} (the new expiry is now +
-- ttl), lost {}, max_hold {hold_until} (the hold deadline is reached).
local lease = A_lease
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], w = KEYS[4], l = KEYS[5], t = KEYS[6], rids = KEYS[7],
           rid_until = KEYS[8], ended = KEYS[9], rid_one = KEYS[10], fresh = false, latest = 0, first = false}
local limit_raw = redis.call('GET', k.l)
local now, now_at = now_ms_and_text()

-- The first holder's renewal in the limit key.
if is_first_holder(limit_raw) then
  local fence, granted_at, held, own_ttl, max_hold, rid = claimed_brief(limit_raw, FIRST_CLAIMED_BRIEF)
  if held == lease then
    local ttl, hold_until, cut = renewal_ttl(A_ttl_ms, own_ttl, granted_at, max_hold, now)
    if not ttl then return lease_reply('max_hold', nil, R_HOLD_UNTIL, decimal(hold_until)) end
    renew_expiry(k, k.l, ttl, fence, cut, hold_until, now)
    rid_extend(k, rid, lease, now + ttl)
    return lease_reply('renewed', nil, R_FENCE, fence, R_TTL, ttl, R_NOW, now_at, R_HOLD_UNTIL,
                       decimal(hold_until))
  end
  unfold(k, limit_raw, now)
end

-- The reply, the holder's expiry moved when it holds.
local function renew()
  local expiry = redis.call('ZSCORE', k.h, lease)
  if not expiry or tonumber(expiry) <= now then return {'lost'} end -- an expired holder is not purged here
  local raw = redis.call('HGET', k.d, lease)
  if not raw then return {'lost'} end
  local fence, own_ttl, max_hold, granted_at = claimed_numbers(raw)
  local rec -- the decoded record, of a holder with more to do (unclaimed, a request_id)
  if not fence then
    rec = cjson.decode(raw)
    fence, own_ttl, max_hold, granted_at = decimal(rec.fence), decimal(rec.ttl), rec.max_hold, rec.granted_at
  end
  local ttl, hold_until, cut = renewal_ttl(A_ttl_ms, own_ttl, granted_at, max_hold, now)
  if not ttl then return {'max_hold', R_HOLD_UNTIL, decimal(hold_until)} end
  if cut then
    mark_hold_end(k, fence, hold_until, now)
  elseif now + ttl < tonumber(expiry) then
    hold_end_drop(k, fence)
  end
  if rec and rec.claimed ~= 1 then
    rec.claimed = 1
    redis.call('HSET', k.d, lease, record_json(rec))
  end
  set_expiry(k, lease, now + ttl)
  if rec then rid_extend(k, rec.rid, lease, now + ttl) end
  return {'renewed', R_FENCE, fence, R_TTL, ttl, R_NOW, now_at, R_HOLD_UNTIL, decimal(hold_until)}
end

local reply = renew()
if k.fresh or reply[1] == 'renewed' then keep_alive(k, now, tonumber(A_keep_ms)) end
return lease_reply(reply[1], nil, unpack(reply, 2))
