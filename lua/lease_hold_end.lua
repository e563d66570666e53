-- uses: lib_lease.lua
-- SPDX-License-Identifier: Apache-2.0
-- lease_hold_end.lua: whether a lease a renewal found gone ended at its hold
-- deadline. A renewal that the deadline cut kept "<fence>|max_hold" in the
-- ended set of its lock or semaphore (lib_lease.lua mark_hold_end); once that
-- deadline has passed, the lease ended there.
-- KEYS: ended
--   the ended set of the lock or semaphore (lib_lease.lua)
-- ARGV: fence
--   the lease's fence, from its token
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
-- Returns (lib_lease.lua lease_reply): max_hold {hold_until} (the lease ended at its hold deadline), or
-- lost {}.
local till = redis.call('ZSCORE', KEYS[1], A_fence .. '|max_hold')
if not till then return lease_reply('lost') end
local hold_until = -till - LEASE_RELEASED_KEPT_MS
if now_ms() < hold_until then return lease_reply('lost') end
return lease_reply('max_hold', nil, R_HOLD_UNTIL, decimal(hold_until))
