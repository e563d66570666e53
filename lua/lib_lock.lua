-- SPDX-License-Identifier: Apache-2.0
-- lib_lock.lua: functions shared by the lock scripts (prepended to every script
-- whose first line is "-- uses: lib_lock.lua"; never called on its own).
--
-- Key layout of lock N; every key carries the hash tag {N}, base is "fg:lk:{N}:":
--   base.."h"           holder hash: lease, fence, owner, ttl, hold_until, granted_at, claimed, rid,
--                       inst, attach (the gateway and connection that asked)
--   base.."q"           queue: sorted set of waiting lease ids, scored by arrival (the
--                       last score + 1, so an idle lock leaves no counter behind)
--   base.."w"           waiter hash: lease id -> JSON {inst, attach, ttl, max_hold, owner, rid}
--   base.."r:"..rid     lease id of an acquire request_id (idempotent retries)
--   base.."x"           recently released leases (lib_lease.lua: idempotent release)
-- Global: "fg:fence" (the one fence sequence), "fg:inst:"..id (a live gateway),
-- channel "fg:bell:"..id (doorbell of gateway id: "l|<lease>|<name>").

-- Grants the free lock to the oldest waiter whose gateway is alive, dropping
-- waiters of dead gateways on the way (and forgetting their request_id, so that
-- the client's retry through another gateway starts afresh instead of finding a
-- lease that ended without ever being granted). The grant lasts claim_ms (capped
-- by the waiter's ttl) until its gateway claims it; the doorbell tells that gateway.
-- Issues no fence unless the sequence may issue one (lib_lease.lua).
-- Returns the granted lease id, or nil.
local function grant_next(base, fence_key, name, claim_ms, now)
  if not redis.call('ZRANGE', base .. 'q', 0, 0)[1] then return nil end -- the uncontended case
  if not fence_ready(fence_key) then return nil end
  while true do
    local head = redis.call('ZRANGE', base .. 'q', 0, 0)[1]
    if not head then return nil end
    redis.call('ZREM', base .. 'q', head)
    local raw = redis.call('HGET', base .. 'w', head)
    redis.call('HDEL', base .. 'w', head)
    if raw then
      local w = cjson.decode(raw)
      if redis.call('EXISTS', 'fg:inst:' .. w.inst) == 1 then
        local fence = redis.call('INCR', fence_key)
        redis.call('HSET', base .. 'h', 'lease', head, 'fence', fence, 'owner', w.owner,
                   'ttl', w.ttl, 'hold_until', now + w.max_hold, 'granted_at', now, 'claimed', '0',
                   'rid', w.rid, 'inst', w.inst, 'attach', w.attach)
        redis.call('PEXPIRE', base .. 'h', math.min(w.ttl, claim_ms))
        redis.call('PUBLISH', 'fg:bell:' .. w.inst, 'l|' .. head .. '|' .. name)
        return head
      end
      if w.rid ~= '' and redis.call('GET', base .. 'r:' .. w.rid) == head then
        redis.call('DEL', base .. 'r:' .. w.rid)
      end
    end
  end
end

-- Starts the full lease of a granted-but-unclaimed holder, on behalf of the
-- connection attach. Returns the expiry time.
local function claim(hkey, now, attach)
  local ttl = tonumber(redis.call('HGET', hkey, 'ttl'))
  redis.call('HSET', hkey, 'claimed', '1', 'attach', attach)
  redis.call('PEXPIRE', hkey, ttl)
  return now + ttl
end

-- The reply for a lease that holds the lock.
local function granted_reply(hkey, lease, expires_at)
  local f = redis.call('HMGET', hkey, 'fence', 'ttl')
  return cjson.encode({r = 'granted', lease = lease, fence = tonumber(f[1]),
                       ttl = tonumber(f[2]), expires_at = expires_at})
end
