-- SPDX-License-Identifier: Apache-2.0
-- lib_waiters.lua: the first waiters of a lock's or semaphore's queue as a
-- status read shows them (prepended to every script whose first line names
-- it; never called on its own). Reads only the keys it is given.

-- The first n (> 0) waiters of queue (sorted set of lease ids) in queue order,
-- each {owner, since} from its record in the hash waiters (lib_lock.lua,
-- lib_sem.lua); since 0 for a record without one.
local function first_waiters(queue, waiters, n)
  local ids = redis.call('ZRANGE', queue, 0, n - 1)
  if #ids == 0 then return nil end
  local first = {}
  for i, rec in ipairs(redis.call('HMGET', waiters, unpack(ids))) do
    local w = rec and cjson.decode(rec) or {}
    first[i] = {owner = w.owner or '', since = w.since or 0}
  end
  return first
end
