-- uses: lib_lease.lua lib_holder.lua lib_sem_holder.lua lib_sem_life.lua
-- SPDX-License-Identifier: Apache-2.0
-- sem_release_handover.lua: a release of a holder of semaphore N whose slot
-- goes on to the oldest waiter, which the gateway runs before sem_release.lua
-- while an earlier call lately found a queue at N (src/lease/contention.h):
-- the holder leaves and the waiter takes its slot, naming only the keys that
-- touches (Redis hands each key and argument of a call to Lua at a price).
-- It releases only where sem_release.lua would hand the one slot that frees
-- to the oldest waiter and do nothing else: the lease holds in the holders'
-- keys, every slot of the limit in force is held by a lease that has not run
-- out (sem_release.lua purges those first and hands their slots on as well),
-- fences may be issued, and the oldest waiter's record is of the layout
-- lib_lease.lua waiter_json writes, its request_id (if any) written without
-- an escape, of this gateway or of one alive (sem_release.lua drops a dead
-- gateway's waiters on the way). Where nobody waits (the queue emptied since
-- the hint), it releases beside the other holders as sem_release_more.lua
-- does, where another holder stays and none ran out. Anything else (a retried
-- release, a lease that no longer holds, the last holder) it leaves to
-- sem_release.lua, which the gateway then runs: it answers "contended"
-- without a write.
-- What it does is what sem_release.lua does for the same call: drops the
-- holder, keeps its end in the ended set for retried releases and watchers
-- and tells the watchers (lib_lease.lua mark_released); takes the waiter out
-- of the queue, issues its fence and writes its holder record, unclaimed; a
-- waiter of this gateway is granted its whole lease and named in the reply
-- (lib_sem.lua grant_free), another gateway's the claim window, and its
-- doorbell rings; keeps the waiter's request_id for as long as its lease
-- (lib_lease.lua rid_extend_set); and keeps the keys alive (lib_sem_life.lua
-- keep_alive).
-- KEYS: holders data queue waiters limit tickets fence fence_limit gateways rids rid_until ended watched
--   those keys of lib_sem.lua and lib_lease.lua; on a Redis Cluster the fence sequence's keys name the
--   script's slot (lib_lease.lua publish)
-- ARGV: name lease claim_ms instance
--   as sem_release.lua has them
-- Returns (lib_lease.lua lease_reply): released {granted_at} with the grant handed over, contended {},
-- or nofence {}: no fence may be issued (as sem_acquire_fast.lua).
local raw = redis.call('HGET', KEYS[2], A_lease)
if not raw then return lease_reply('contended') end
local v = redis.call('MGET', KEYS[7], KEYS[8], KEYS[5], KEYS[13])
local now, at = now_ms_and_text()
local head = redis.call('ZRANGE', KEYS[3], '0', '0')[1]
if not head then
  -- Nobody waits (the queue emptied since the hint): the release beside other holders of
  -- sem_release_more.lua, where another holder stays and none ran out.
  if redis.call('ZCARD', KEYS[1]) < 2 or redis.call('ZCOUNT', KEYS[1], '-inf', at) > 0 then
    return lease_reply('contended')
  end
  return released_reply(nil, holder_leave({h = KEYS[1], d = KEYS[2], ended = KEYS[12]}, A_name, A_lease, raw, now,
                                          v[4]))
end
if not fences_left(v) then return lease_reply('nofence') end
-- The holders never outnumber the limit (a grant fills a free slot), so as
-- many live ones as the limit means every slot held and none run out.
local live = redis.call('ZCOUNT', KEYS[1], '(' .. at, '+inf')
if live ~= tonumber(v[3]) then return lease_reply('contended') end
local w = redis.call('HGET', KEYS[4], head)
-- The waiter's fields read off its record's text where waiter_json writes them, the two ids at their places (the
-- gateway's are LEASE_ID_LEN hex digits each), the owner and the request_id as their JSON texts, which the holder
-- record takes as they are: a pattern reads a text a character at a time, at several times the cost of a plain
-- search. (Neither JSON string holds a quote that is not escaped, so each search finds the separator after it.)
if not w or string.sub(w, 1, 9) ~= '{"inst":"' or string.sub(w, 42, 53) ~= '","attach":"' then
  return lease_reply('contended')
end
local ttl, max_hold, owner_at = string.match(w, '^","ttl":"(%d+)","max_hold":"(%d+)","owner":()', 86)
if not owner_at then return lease_reply('contended') end
local rid, rid_at = '', string.find(w, ',"rid":"","since":', owner_at, true)
if not rid_at then
  rid_at = string.find(w, ',"rid":"', owner_at, true)
  local since_at = rid_at and string.find(w, '","since":', rid_at + 8, true)
  if not since_at then return lease_reply('contended') end
  rid = string.sub(w, rid_at + 8, since_at - 1)
  -- A request_id is a key of the request ids' hash: one written with an escape is left to the full script,
  -- which decodes it.
  if string.find(rid, '\\', 1, true) then return lease_reply('contended') end
end
local inst, attach, owner = string.sub(w, 10, 41), string.sub(w, 54, 85), string.sub(w, owner_at, rid_at - 1)
local k = {h = KEYS[1], d = KEYS[2], q = KEYS[3], w = KEYS[4], l = KEYS[5], t = KEYS[6], gateways = KEYS[9],
           rids = KEYS[10], rid_until = KEYS[11], ended = KEYS[12], fresh = live == 1, latest = 0}
local here = inst == A_instance
if not here and not gateway_alive(k, inst, now) then return lease_reply('contended') end
local granted_at = holder_leave(k, A_name, A_lease, raw, now, v[4])
-- The grant. Where the released holder was the only one its keys went with it, and the grant makes them anew
-- (fresh: keep_alive sets every time to live).
redis.call('ZREM', k.q, head)
redis.call('HDEL', k.w, head)
local next_fence = decimal(redis.call('INCR', KEYS[7]))
local ttl_ms = tonumber(ttl)
local expires_at = now + (here and ttl_ms or math.min(ttl_ms, tonumber(A_claim_ms)))
local expires_text = decimal(expires_at)
set_expiry(k, head, expires_at, expires_text)
redis.call('HSET', k.d, head, record_join(next_fence, ttl, max_hold, at, ',"claimed":0,"rid":"' .. rid ..
                                          '","inst":"' .. inst .. '","attach":"' .. attach .. '","owner":' .. owner ..
                                          '}'))
rid_extend_set(k, rid, now + ttl_ms)
local handoff
if here then
  handoff = {{lease = head, fence = next_fence, ttl = ttl, expires_at = expires_text}}
else
  publish(CHANNEL_BELL_PREFIX .. inst, 's|' .. head .. '|' .. A_name)
end
keep_alive(k, now, SEM_KEEP_MS)
return released_reply(handoff, granted_at)
