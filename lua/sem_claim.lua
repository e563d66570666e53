-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_claim.lua: a waiter of semaphore N that the doorbell rang (a release, a
-- revoke or a give-up on another gateway granted it a slot for the claim
-- window, lib_sem.lua grant_free) claims the grant, naming only the keys a
-- claim touches (Redis hands each key and argument of a call to Lua at a
-- price). It claims only a grant to this very attempt (attach) not claimed
-- yet whose claim window has not run out; anything else (no grant: the ring
-- was another one's; a grant claimed, or a retry's; a window run out, which
-- sem_acquire.lua purges and hands on first) it leaves to sem_acquire.lua,
-- which the gateway then runs as the attempt looking again: it answers
-- "contended" without a write.
-- What it does is what sem_acquire.lua does for the same call (lib_sem_life.lua
-- claim, keep_alive): starts the lease for its ttl up to its hold deadline,
-- keeps its request_id as long and the semaphore's keys alive past it. As a
-- renewal (sem_renew.lua), it purges nobody: holders that ran out, and the
-- slots they free, are left to the next acquire, release or give-up, and to the
-- waiters, which look again when the earliest holder's lease ends (lib_sem.lua).
-- It issues no fence, so it does not look at the fence sequence (as
-- lock_claim.lua).
-- KEYS: holders data queue waiters limit tickets rids rid_until
--   those keys of lib_sem.lua and lib_lease.lua (the request ids' two come last: a call for a
--   waiter without a request_id names none of them)
-- ARGV: lease attach
-- Returns (lib_lease.lua lease_reply): granted {lease, fence, ttl, expires_at}, or contended {}.
local raw = redis.call('HGET', KEYS[2], A_lease)
local rec = raw and cjson.decode(raw)
if not rec or rec.claimed ~= 0 or rec.attach ~= A_attach or (rec.rid ~= '' and #KEYS < 8) then
  return lease_reply('contended')
end
local now = now_ms()
local window_end = tonumber(redis.call('ZSCORE', KEYS[1], A_lease))
if not window_end or window_end <= now then return lease_reply('contended') end
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], w = KEYS[4], l = KEYS[5], t = KEYS[6], rids = KEYS[7],
           rid_until = KEYS[8], fresh = false, latest = 0, first = false, held = false}
local expires_at = claim(k, A_lease, rec, now, A_attach)
keep_alive(k, now, SEM_KEEP_MS)
return granted_reply(A_lease, rec, expires_at, nil)
