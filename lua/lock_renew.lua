-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_renew.lua: the holder extends its lease; the fence stays the same.
-- max_hold_ms caps the hold: the new expiry is min(now + ttl, hold_until).
-- It names only the keys a renewal touches (Redis hands each key of a call to
-- Lua at a price): the holder, and the request ids it keeps. A claimed
-- holder's record stays as it is, only its time to live moves (and it is read
-- no further than that takes, lib_holder.lua claimed_brief), and its
-- request_id's time with it (lib_lease.lua rid_extend); the time to live is
-- the ttl as asked unless the hold's deadline cuts it (no sum printed); a
-- renewal the deadline cuts keeps the hold's end in the ended set, and one
-- that shortens the lease drops it (lib_lease.lua renew_expiry).
-- KEYS: holder rids rid_until ended rid_one
--   those keys of lib_lock.lua and lib_lease.lua
-- ARGV: lease ttl_ms
--   lease: the lease id, or "<lease id> <attach>" for a lock set's attempt (attach: its connection's
--   id), which answers superseded where a retry of its request_id took the lock over (the holder names
--   the retry's connection): the set is the retry's now
--   ttl_ms "0": the lease's own ttl
-- Returns (lib_lease.lua lease_reply): renewed {fence, ttl, now, hold_until} (the new expiry is now +
-- ttl), lost {}, max_hold {hold_until} (the hold deadline is reached: nothing is left to grant),
-- superseded {}.
local lease, attach = A_lease, nil
if #lease > LEASE_ID_TEXT then
  lease, attach = string.sub(lease, 1, LEASE_ID_TEXT), string.sub(lease, LEASE_ID_TEXT + 2)
end
local k = {h = KEYS[1], rids = KEYS[2], rid_until = KEYS[3], ended = KEYS[4], rid_one = KEYS[5]}
local raw = redis.call('GET', k.h)
local fence, granted_at, held, own_ttl, max_hold, rid
if not attach then fence, granted_at, held, own_ttl, max_hold, rid = claimed_brief(raw) end
local h -- the whole record, of a holder with more to do (unclaimed, of the layout before, a set's)
if not fence then
  h = holder_read(raw)
  if not h then return lease_reply('lost') end
  fence, granted_at, held, own_ttl, max_hold, rid = h.fence, h.granted_at, h.lease, h.ttl, h.max_hold, h.rid
end
if held ~= lease then return lease_reply('lost') end
if attach and h.attach ~= attach then return lease_reply('superseded') end
local now, now_at = now_ms_and_text()
local ttl, hold_until, cut = renewal_ttl(A_ttl_ms, own_ttl, granted_at, max_hold, now)
if not ttl then return lease_reply('max_hold', nil, R_HOLD_UNTIL, decimal(hold_until)) end
if not h or h.claimed == '1' then
  renew_expiry(k, k.h, ttl, fence, cut, hold_until, now)
else -- unclaimed: no renewal came before, nor a mark
  redis.call('SET', k.h, holder_rewrite(h, '1', h.attach), 'PX', ttl)
  if cut then mark_hold_end(k, fence, hold_until, now) end
end
rid_extend(k, rid, lease, now + ttl)
return lease_reply('renewed', nil, R_FENCE, fence, R_TTL, ttl, R_NOW, now_at, R_HOLD_UNTIL, decimal(hold_until))
