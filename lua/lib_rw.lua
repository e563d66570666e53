-- SPDX-License-Identifier: Apache-2.0
-- lib_rw.lua: the fence check shared by the fenced Redis write scripts
-- (prepended to every script whose first line is "-- uses: lib_rw.lua").
--
-- Every write script takes these keys, and these arguments before its own:
-- KEYS: key write_fence audit fence_floor revoked
--   the written key, its fence KEY_WRITE_FENCE_PREFIX..key, the audit stream
--   KEY_AUDIT, the write floor KEY_FENCE_FLOOR, the revoked fences KEY_REVOKED
--   (lib_lease.lua)
-- ARGV: fence resource lock owner client_addr method principal trace_id
--   the presented fence, the resource ("redis:"..key), the lock or semaphore
--   name of the token, its owner ("" if none), the client address, the HTTP
--   method, the id of the writer's API key ("" when auth is off), the trace id
--   of the request's traceparent ("" if none)
-- A write is applied iff its fence >= the highest fence stored for the key; the
-- stored fence then becomes the presented one. A stale write changes nothing
-- but appends one audit entry to the stream, which the gateways drain into
-- Postgres (fencegate.rejections), so the record survives a Postgres outage.
-- The fence key outlives a DELETE of the key: a stale holder cannot recreate it.
-- The highest fence of a key lives only in Redis, so after Redis may have lost
-- data (lua/fence_check.lua) every token issued before is refused: the recovery
-- raises the write floor above every fence issued before the loss, and a fence
-- below the floor counts as stale whatever is stored for the key. Without a
-- floor (a flushed Redis, before any recovery) nothing is written: the script
-- answers "nofloor" and the gateway recovers first.
-- A write presenting a revoked fence is refused whatever the stored fence, with
-- its own audit entry (reason "revoked"); if the revoked set is missing (Redis
-- lost it) the script answers "norevoked" and the gateway rebuilds it first.

-- Appends the audit entry of a refused write; returns the refusal's reply.
local function refuse(outcome, reason, cur)
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local id = redis.call('XADD', KEYS[3], '*', 'resource', A_resource, 'lock', A_lock,
                        'presented', A_fence, 'current', tostring(cur), 'owner', A_owner,
                        'client_addr', A_client_addr, 'method', A_method, 'reason', reason,
                        'at_ms', tostring(at), 'principal', A_principal,
                        'trace_id', A_trace_id)
  return cjson.encode({r = outcome, current = cur, audit_id = id, at_ms = at})
end

-- Returns nil when the write may go on, else the JSON reply of a refused
-- write (revoked or stale) or of a Redis that has no floor or no revoked set.
local function refuse_stale()
  local v = redis.call('MGET', KEYS[2], KEYS[4])
  if v[2] == false then return cjson.encode({r = 'nofloor'}) end
  if redis.call('EXISTS', KEYS[5]) == 0 then return cjson.encode({r = 'norevoked'}) end
  local cur = math.max(tonumber(v[1] or '0'), tonumber(v[2]))
  if redis.call('SISMEMBER', KEYS[5], A_fence) == 1 then return refuse('revoked', 'revoked', cur) end
  if tonumber(A_fence) >= cur then return nil end
  return refuse('stale', 'stale_fence', cur)
end

-- Stores the presented fence as the key's highest.
local function raise_fence()
  redis.call('SET', KEYS[2], A_fence)
end
