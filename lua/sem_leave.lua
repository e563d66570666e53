-- uses: lib_lease.lua lib_sem.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_leave.lua: waiters of semaphore N whose clients hung up leave its queue,
-- many in one step (the gateway gathers them as the hang-ups arrive).
-- KEYS: lib_sem.lua
-- ARGV: keep_ms waiters
--   waiters: per waiter its lease id and its attach id, 32 characters each,
--   with no separator.
-- Returns JSON {r = 'left', left = "<one digit per waiter>"}: 1 when the waiter
-- is out of the queue (it left now, or was no longer there, or a retry of its
-- request owns it), 0 when its lease holds a slot (a grant came first): that
-- one must be given up on its own (sem_cancel.lua, mode drop).
local keep_ms, packed = tonumber(ARGV[1]), ARGV[2]
local k = sem_keys()
local now = now_ms()
local left = {}
for i = 1, #packed, 64 do
  local lease, attach = string.sub(packed, i, i + 31), string.sub(packed, i + 32, i + 63)
  local out = '1'
  if holder_of(k, lease) then
    out = '0'
  else
    local raw = redis.call('HGET', k.w, lease)
    local w = raw and cjson.decode(raw)
    if w and w.attach == attach then
      rid_forget(k, w.rid, lease)
      redis.call('ZREM', k.q, lease)
      redis.call('HDEL', k.w, lease)
    end
  end
  left[#left + 1] = out
end
tidy(k, now, keep_ms)
return cjson.encode({r = 'left', left = table.concat(left)})
