-- uses: lib_lease.lua
-- SPDX-License-Identifier: Apache-2.0
-- lease_gone.lua: how a lease that a renewal found gone ended, where Redis
-- still tells it: released, or at its hold deadline. A release leaves the
-- end's record "~<lease> <fence> released" in the key that held the lease (a
-- lock's holder key, an idle semaphore's limit key: lib_lease.lua end_text),
-- which a first try granting again moves to "<key>:<fence>" (end_move) and a
-- full script files in the ended set (end_bury), where a release that left
-- other holders or waiters put "<fence>|released" at once (mark_released):
-- read as a watch reads them (lock_watch.lua, sem_watch.lua). A renewal that
-- the deadline cut kept "<fence>|max_hold" in the ended set (mark_hold_end);
-- once that deadline has passed, the lease ended there. Run only after a
-- renewal answered lost, so that a renewal's own path reads none of this.
-- The deadline comes first: a lease released after a renewal the deadline
-- cut is answered as one that reached its deadline once that has passed.
-- KEYS: ended record moved_end
--   the ended set of the lock or semaphore (lib_lease.lua), the key of its
--   end's record (a lock's holder key, a semaphore's limit key), and the key
--   that record moves to (lib_lease.lua end_move)
-- ARGV: fence
--   the lease's fence, from its token
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns (lib_lease.lua lease_reply): released {} (the lease was released),
-- max_hold {hold_until} (it ended at its hold deadline), or lost {} (neither
-- is known: it expired, was revoked, or its end is no longer kept).
local till = redis.call('ZSCORE', KEYS[1], A_fence .. '|max_hold')
if till then
  local hold_until = -till - LEASE_RELEASED_KEPT_MS
  if now_ms() >= hold_until then return lease_reply('max_hold', nil, R_HOLD_UNTIL, decimal(hold_until)) end
end
local _, fence, reason = end_read(redis.call('GET', KEYS[2]))
if fence ~= A_fence then reason = ended_reason(KEYS[1], KEYS[3], A_fence) end
if reason == 'released' then return lease_reply('released') end
return lease_reply('lost')
