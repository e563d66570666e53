-- uses: lib_lease.lua lib_holder.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_leave.lua: waiters of lock N whose clients hung up leave its queue, many
-- in one step (the gateway gathers them as the hang-ups arrive).
-- KEYS: lib_lock.lua
-- ARGV: waiters
--   waiters: per waiter its lease id and its attach id, 32 characters each,
--   with no separator.
-- Returns (lib_lease.lua lease_reply) left {left}, one digit per waiter: 1 when the waiter
-- is out of the queue (it left now, or was no longer there, or a retry of its
-- request owns it), 0 when its lease holds the lock (a grant came first): that
-- one must be given up on its own (lock_cancel.lua, mode drop).
local packed = A_waiters
local k = lock_keys()
local h = holder_read(redis.call('GET', k.h))
local holder = h and h.lease
local left = leave_queue(k, packed, function(lease) return lease == holder end)
queue_settled(k)
return lease_reply('left', nil, R_LEFT, left)
