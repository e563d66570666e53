-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua lib_sem.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_leave.lua: waiters of semaphore N whose clients hung up leave its queue,
-- many in one step (the gateway gathers them as the hang-ups arrive).
-- KEYS: lib_sem.lua
-- ARGV: keep_ms waiters
--   waiters: per waiter its lease id and its attach id, 32 characters each,
--   with no separator.
-- Returns (lib_lease.lua lease_reply) left {left}, one digit per waiter: 1 when the waiter
-- is out of the queue (it left now, or was no longer there, or a retry of its
-- request owns it), 0 when its lease holds a slot (a grant came first): that
-- one must be given up on its own (sem_cancel.lua, mode drop).
local keep_ms, packed = tonumber(A_keep_ms), A_waiters
local k = sem_keys()
local now = now_ms()
unfold_now(k, now)
local left = leave_queue(k, packed, function(lease) return holder_of(k, lease) ~= nil end)
tidy(k, now, keep_ms)
return lease_reply('left', nil, R_LEFT, left)
