-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_watch.lua: whether the lease with fence F still holds lock N, and if
-- not, how it ended (read-only).
-- It marks the lock watched for mark_ms first (lib_lease.lua mark_watched), so
-- an end after this look is published; that tiny write is allowed while Redis
-- is out of memory, so a watch works then too.
-- KEYS: holder ended watched moved_end
--   the holder key (lib_lock.lua), the ended leases and the watched mark (lib_lease.lua),
--   and the key the holder key's record of the lease's end moves to when the lock is granted
--   again (lib_lease.lua end_move)
-- ARGV: fence mark_ms
--   mark_ms: how long the mark lasts; "0" for a look that waits for nothing (no mark)
-- flags: allow-oom
-- Returns (lib_lease.lua lease_reply) held {pttl}, or how the lease ended: released {},
-- expired {} or revoked {}.
mark_watched(KEYS[3], A_mark_ms)
local raw = redis.call('GET', KEYS[1])
local h = holder_read(raw)
if h and h.fence == A_fence then
  return lease_reply('held', nil, R_PTTL, decimal(redis.call('PTTL', KEYS[1])))
end
local _, fence, reason = end_read(raw)
if fence == A_fence then return lease_reply(reason) end
return lease_reply(ended_reason(KEYS[2], KEYS[4], A_fence))
