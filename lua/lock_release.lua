-- uses: lib_lease.lua lib_holder.lua lib_lock.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_release.lua: the holder releases; the lock passes to the next live
-- waiter in the same step.
-- KEYS: lib_lock.lua moved_end
--   moved_end: the key the end's record of the lease with fence moves to when the lock is
--   granted again (lib_lease.lua end_move), the last
-- ARGV: name lease fence claim_ms marker_ms instance
--   fence: the lease's (a retried release looks it up); marker_ms: how long
--   the released marker is kept; instance: the gateway's id
-- Returns (lib_lease.lua lease_reply, with the grant to a waiter of this gateway, see
-- grant_next): released {held_ms}, or released {again} for a repeated release
-- of the same lease, lost {} (the lease expired or was taken over).
local name, lease = A_name, A_lease
-- The fence sequence, the holder key, the watched mark and the tickets (is anybody waiting?) in one read.
local v = lock_end_read()
local now = now_ms()

local h = holder_brief(v[3])
local k = lock_keys()
if h and h.lease == lease then
  local handoff = {}
  local next = end_and_pass(k, name, h, 'released', tonumber(A_claim_ms), A_marker_ms, now, A_instance,
                            handoff, v)
  index_drop_if_idle(k, name, next == false)
  return lease_reply('released', handoff, R_HELD_MS, decimal(now - h.granted_at))
end
local ended, _, reason = end_read(v[3])
if (ended == lease and reason == 'released') or was_released(k, KEYS[#KEYS], A_fence, now) then
  return lease_reply('released', nil, R_AGAIN, '1')
end
return lease_reply('lost')
