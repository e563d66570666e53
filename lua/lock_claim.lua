-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- lock_claim.lua: a waiter of lock N that the doorbell rang (a release or a
-- revoke on another gateway granted it the lock for the claim window,
-- lib_lock.lua grant_next) claims the grant, naming only the keys a claim
-- touches (Redis hands each key and argument of a call to Lua at a price). It
-- claims only a grant to this very attempt (attach) not claimed yet; anything
-- else (no grant: the ring was another one's; a grant claimed, or a retry's)
-- it leaves to lock_acquire.lua, which the gateway then runs as the attempt
-- looking again: it answers "contended" without a write.
-- What it does is what lock_acquire.lua does for the same call (lib_holder.lua
-- holder_claim): starts the lease for its ttl up to its hold deadline and keeps
-- its request_id as long. Like a renewal (lock_renew.lua), which claims a grant
-- handed over in-process, it issues no fence, so it does not look at the fence
-- sequence: a grant made before Redis lost data is claimed as it stands, below
-- every fence the recovery lets issue after it.
-- KEYS: holder rids rid_until
--   those keys of lib_lock.lua and lib_lease.lua (the request ids' two come last: a call for a waiter
--   without a request_id names none of them)
-- ARGV: lease attach
-- Returns (lib_lease.lua lease_reply): granted {lease, fence, ttl, expires_at}, or contended {}.
local h = holder_read(redis.call('GET', KEYS[1]))
if not h or h.lease ~= A_lease or h.claimed ~= '0' or h.attach ~= A_attach or (h.rid ~= '' and #KEYS < 3) then
  return lease_reply('contended')
end
local k = {h = KEYS[1], rids = KEYS[2], rid_until = KEYS[3]}
return holder_granted_reply(h, holder_claim(k, h, now_ms(), A_attach))
