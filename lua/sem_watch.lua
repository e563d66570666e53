-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_watch.lua: whether the holder with fence F still holds a slot of
-- semaphore N, and if not, how its lease ended (expired holders count as
-- ended but are left for the next transition to purge). It marks the
-- semaphore watched for mark_ms first (lib_lease.lua mark_watched), so an end
-- after this look is published; that tiny write is allowed while Redis is out
-- of memory, so a watch works then too.
-- KEYS: holders data limit ended watched moved_end
--   the holders, holder data and limit (lib_sem.lua: the limit key may hold the
--   first holder, or once idle the end of the last lease), the ended leases and the watched mark
--   (lib_lease.lua), and the key the limit key's record of the lease's end moves to when the
--   idle semaphore is granted again (lib_lease.lua end_move)
-- ARGV: fence mark_ms
--   mark_ms: how long the mark lasts; "0" for a look that waits for nothing (no mark)
-- flags: allow-oom
-- Returns (lib_lease.lua lease_reply) held {pttl}, or how the lease ended: released {},
-- expired {} or revoked {}.
mark_watched(KEYS[5], A_mark_ms)
local fence = tonumber(A_fence)
local limit_raw = redis.call('GET', KEYS[3])
local first = holder_brief(limit_raw, FIRST_HOLDER_BRIEF) -- a first holder kept in the limit key (lib_sem.lua)
if first and first.fence == A_fence then
  return lease_reply('held', nil, R_PTTL, decimal(redis.call('PTTL', KEYS[3])))
end
local now = now_ms()
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local raw = redis.call('HGET', KEYS[2], live[i])
  if raw and cjson.decode(raw).fence == fence then
    return lease_reply('held', nil, R_PTTL, decimal(live[i + 1] - now))
  end
end
local _, last, reason = end_read(limit_raw)
if last == A_fence then return lease_reply(reason) end
return lease_reply(ended_reason(KEYS[4], KEYS[6], A_fence))
