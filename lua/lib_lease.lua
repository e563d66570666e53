-- SPDX-License-Identifier: Apache-2.0
-- lib_lease.lua: what every lease script shares, locks and semaphores alike
-- (prepended through "-- uses: lib_lease.lua ..."): the server clock, the
-- guard of the one fence sequence, the markers of released leases, and the
-- news of ended leases for watchers.

-- Redis's own clock in milliseconds: the only clock a lease is measured by.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The fence sequence.
-- "fg:fence" is the last fence issued; "fg:fence_limit" the highest fence that
-- Postgres has reserved (fencegate.fence_reservation). A script may start
-- issuing fences only while the sequence exists and is below the limit; else it
-- answers "nofence" and the gateway reserves the next block in Postgres, so a
-- fence is never issued that Postgres could not remember after Redis loses its
-- data. A script that issues several fences may pass the limit by at most the
-- fences it issues (bounded by the largest semaphore limit); recovery after a
-- loss skips that much.

-- True if fences may be issued now.
local function fence_ready(fence_key)
  local v = redis.call('MGET', fence_key, fence_key .. '_limit')
  return v[1] ~= false and v[2] ~= false and tonumber(v[1]) < tonumber(v[2])
end

-- Released leases are remembered per lock or semaphore (base.."x", a sorted set
-- of lease id -> release time, the newest RELEASED_KEPT for up to ttl ms), so a
-- retried release answers 200 again, without one key per released lease.
local RELEASED_KEPT = 64

local function mark_released(base, lease, now, ttl)
  local key = base .. 'x'
  redis.call('ZADD', key, now, lease)
  redis.call('ZREMRANGEBYRANK', key, 0, -RELEASED_KEPT - 1)
  redis.call('PEXPIRE', key, ttl)
end

local function was_released(base, lease, now, ttl)
  local at = redis.call('ZSCORE', base .. 'x', lease)
  return at ~= false and tonumber(at) > now - ttl
end

-- Ended leases, for watchers: base.."e" is a sorted set of "<fence>|<reason>"
-- scored by fence (the newest ENDED_KEPT, for up to ttl ms), and every end is
-- published on channel "fg:ended" as "<kind>|<fence>|<reason>|<name>" so that
-- every gateway wakes its watchers at once. A lease that ends unmarked expired.
local ENDED_KEPT = 64

local function mark_ended(base, kind, name, fence, reason, ttl)
  local key = base .. 'e'
  redis.call('ZADD', key, fence, fence .. '|' .. reason)
  redis.call('ZREMRANGEBYRANK', key, 0, -ENDED_KEPT - 1)
  redis.call('PEXPIRE', key, ttl)
  redis.call('PUBLISH', 'fg:ended', kind .. '|' .. fence .. '|' .. reason .. '|' .. name)
end

local function ended_reason(base, fence)
  local m = redis.call('ZRANGEBYSCORE', base .. 'e', fence, fence)[1]
  if m then return string.match(m, '|(.*)$') end
  return 'expired'
end

-- Revoked fences: the set "fg:revoked" mirrors fencegate.revocations and
-- always holds the member "0" once built, so a set that is missing means Redis
-- lost it: the script answers "norevoked" and the gateway rebuilds it from
-- Postgres before running the script again.
local function revoked_ready(key)
  return redis.call('EXISTS', key) == 1
end

-- The listing index (lease_list.lua): "fg:idx:lk" (locks) and "fg:idx:sm"
-- (semaphores), sorted sets of names all scored 0, read in name order with
-- ZRANGEBYLEX. Every acquire adds its name, so a lock or semaphore that is held
-- or has waiters is always in its index; a name is removed only by a script
-- that sees it idle (a release, or a listing passing over it), so the index
-- holds live names plus the few whose last lease expired unreleased.
local function index_add(index, name)
  redis.call('ZADD', index, 0, name)
end

local function index_drop_if_idle(index, name, idle)
  if idle then redis.call('ZREM', index, name) end
end
