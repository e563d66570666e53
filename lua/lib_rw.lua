-- SPDX-License-Identifier: Apache-2.0
-- lib_rw.lua: the fence check shared by the fenced Redis write scripts
-- (prepended to every script whose first line is "-- uses: lib_rw.lua").
--
-- Every write script takes these keys, and these arguments before its own:
-- KEYS: key write_fence audit fence_floor fence_limit
--   the written key, its fence KEY_WRITE_FENCE_PREFIX..key, the audit stream
--   KEY_AUDIT, the write floor KEY_FENCE_FLOOR, the fence limit KEY_FENCE_LIMIT
--   (on a Redis Cluster each of the key's slot, the limit named after the
--   run_id of the process that runs the script: store/backend/shared_keys.h)
-- ARGV: fence revoked audit lease
--   the presented fence, the name of the revoked fences' set (KEY_REVOKED; on
--   a Redis Cluster that of a slot of this node, below), what a refusal's
--   audit entry names, read only by a refusal: the resource ("redis:"..key),
--   the lock or semaphore name of the token, its kind ("lock" or
--   "semaphore"), its owner ("" if none), the
--   client address, the HTTP method, the id of the writer's API key ("" when
--   auth is off) and the trace id of the request's traceparent ("" if none),
--   each as "<length in bytes>:<bytes>", joined (one argument, not eight:
--   Redis hands each argument of a call to Lua at a price, and writes are
--   seldom refused), and the lease the write needs to hold (require_live_lease)
--   or "": "<kind><lease id><holders key>", kind "l" for a lock (its holder
--   record's key) or "s" for a semaphore (its holders' set), read by
--   lease_holds below
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
--
-- On a Redis Cluster every key above lives in the written key's slot, and the
-- sequence of that slot is trusted only where its fence limit exists: the
-- limit is named after the run_id of the process that raised it, so on a
-- restarted or promoted node, or a slot's new owner, there is none, the script
-- answers "nofloor", and the recovery of the slot's sequence raises the floor
-- first. The revoked set is one per node, named in ARGV, not KEYS (Redis
-- refuses declared keys of two slots; these scripts are flagged
-- allow-cross-slot-keys to read an undeclared key of their own node); it holds
-- the member "run:<run_id>" of the process it was rebuilt on (revoked_load.lua),
-- and a set without the run_id of this process may have missed revocations
-- (a failover, a restart from older data) and answers "norevoked" too. A set
-- named after a slot this node does not serve (the gateway's slot map is
-- stale) answers "elsewhere": the gateway fetches the map and names another.

-- The fields of the packed audit argument (ARGV audit), in order.
local AUDIT_FIELDS = {'resource', 'lock', 'lease_kind', 'owner', 'client_addr', 'method', 'principal', 'trace_id'}

-- The fields packed in A_audit, by name.
local function audit_fields()
  local out, at = {}, 1
  for _, name in ipairs(AUDIT_FIELDS) do
    local colon = string.find(A_audit, ':', at, true)
    local n = tonumber(string.sub(A_audit, at, colon - 1))
    out[name] = string.sub(A_audit, colon + 1, colon + n)
    at = colon + n + 1
  end
  return out
end

-- Appends the audit entry of a refused write; returns the refusal's reply
-- (with floor = true when the write floor refused it, not the key's fence: on
-- a Redis Cluster the floor may be above the block the token's lock issues
-- from, which the gateway then raises: lease/fence.h, fence_lift; and
-- below_floor = true when cur is the write floor, above the key's own fence,
-- which the gateway's answer names as the floor, not as the key's fence).
local function refuse(outcome, reason, cur, by_floor, below_floor)
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local f = audit_fields()
  local id = redis.call('XADD', KEYS[3], '*', 'resource', f.resource, 'lock', f.lock,
                        'lease_kind', f.lease_kind, 'presented', A_fence, 'current', tostring(cur), 'owner', f.owner,
                        'client_addr', f.client_addr, 'method', f.method, 'reason', reason,
                        'at_ms', tostring(at), 'principal', f.principal,
                        'trace_id', f.trace_id)
  return cjson.encode({r = outcome, current = cur, audit_id = id, at_ms = at, floor = by_floor,
                       below_floor = below_floor})
end

-- Looks the presented fence up in the revoked set, with the member that says
-- the set may be read (one command): on one Redis "0", which the set always
-- holds once built (it is rebuilt whenever Redis may have lost it); on a
-- Redis Cluster the run_id of this process (below). Returns whether the fence
-- is revoked, or nil and the reply when the set may not be read.
local function fence_revoked()
  local v
  if KEYS[5] == KEY_FENCE_LIMIT then
    v = redis.call('SMISMEMBER', A_revoked, A_fence, '0')
  else
    v = redis.pcall('SMISMEMBER', A_revoked, A_fence, 'run:' .. string.sub(KEYS[5], -40))
    if v.err then return nil, cjson.encode({r = 'elsewhere'}) end
  end
  if v[2] == 0 then return nil, cjson.encode({r = 'norevoked'}) end
  return v[1] == 1
end

-- True if A_lease (not "") names a lease that still holds: a lock's holder
-- record names it, or a semaphore's first holder record (in its limit key)
-- does, or its holders' set keeps it with an expiry to come. Its keys are not
-- declared (they live in the slot of the lease's name): on one Redis they are
-- this server's, and on a Redis Cluster the gateway names them only where the
-- slot map puts them on the key's node, so that the look and the write are
-- one step and no lease ends between them; a look that cannot read them (the
-- map gone stale, their slot moving) is answered "nolook", and the gateway
-- asks outside the script. A record of a layout this does not read counts as
-- ended, and the gateway then asks again (lease/live.c).
local function lease_holds()
  local kind, lease, holders = string.sub(A_lease, 1, 1), string.sub(A_lease, 2, 33), string.sub(A_lease, 34)
  if kind == 'l' then
    return string.match(redis.call('GET', holders) or '', '^%d+ %d+ (%x+) ') == lease
  end
  local limit = string.sub(holders, 1, -1 - #KEY_SUFFIX_HOLDERS) .. KEY_SUFFIX_LIMIT
  if string.match(redis.call('GET', limit) or '', '^=%d+ %d+ %d+ (%x+) ') == lease then return true end
  local expiry = redis.call('ZSCORE', holders, lease)
  if not expiry then return false end
  local t = redis.call('TIME')
  return tonumber(expiry) > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Returns nil when the write may go on, else the JSON reply of a write whose
-- lease no longer holds (ended: nothing written, nothing audited) or could not
-- be looked at here (nolook), of a
-- refused write (revoked or stale) or of a Redis that has no floor or no
-- revoked set.
local function refuse_stale()
  if A_lease ~= '' then
    local read, holds = pcall(lease_holds)
    if not read then return '{"r":"nolook"}' end
    if not holds then return '{"r":"ended"}' end
  end
  local v = redis.call('MGET', KEYS[2], KEYS[4], KEYS[5])
  if v[2] == false or v[3] == false then return cjson.encode({r = 'nofloor'}) end
  local revoked, unready = fence_revoked()
  if unready then return unready end
  local stored, floor = tonumber(v[1] or '0'), tonumber(v[2])
  local cur = math.max(stored, floor)
  -- a revoked fence is refused whatever is stored: its record names the key's own fence
  if revoked then return refuse('revoked', 'revoked', stored) end
  if tonumber(A_fence) >= cur then return nil end
  return refuse('stale', 'stale_fence', cur, tonumber(A_fence) >= stored or nil, floor > stored or nil)
end

-- Stores the presented fence as the key's highest.
local function raise_fence()
  redis.call('SET', KEYS[2], A_fence)
end
