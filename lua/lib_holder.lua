-- SPDX-License-Identifier: Apache-2.0
-- lib_holder.lua: the record a lock keeps in its holder key (lib_lock.lua), one
-- string, so that a lock's scripts read it with the fence sequence in one MGET
-- and write it with its expiry in one SET, and the same record of a
-- semaphore's first holder, kept so in its limit key (lib_sem.lua) (prepended
-- to every script whose first line names it; never called on its own). It
-- names no key itself: holder_claim writes the keys its caller names, with
-- lib_lease.lua's functions (a script that calls it or holder_granted_reply
-- uses lib_lease.lua too).
--
-- A live holder, whose key expires with its lease:
--   "<fence> <granted_at> <lease> <ttl> <max_hold> <claimed> <inst> <attach> <#rid> <rid><owner>"
--   ttl and max_hold as asked (ms), granted_at when it was granted (ms, Redis time): the hold ends at
--   granted_at + max_hold at the latest (kept as asked so that the first try prints no sum);
--   lease, inst and attach are lowercase hex (inst: the gateway that asked, attach: its connection),
--   the lease LEASE_ID_TEXT characters; claimed is 0 for a grant its gateway has not claimed yet, else 1;
--   #rid is the length in bytes of the request_id that follows, then the owner up to the end (both
--   free text). The two fields a script makes come first, so that the first try of an acquire gets
--   the rest whole from the gateway, which knows it before the script runs.
--   Gateways before this layout wrote the same fields lease first ("<lease> <fence> <ttl> <max_hold>
--   <granted_at> <claimed> ..."): such a record, of a lease held while they were replaced, is read too.
-- Or the end of the last lease (lib_lease.lua end_text). A lease that ends by running out leaves no
-- record: it expired.
-- A semaphore's first holder (lib_sem.lua), in its limit key, which expires with its lease:
--   "=<limit> " then the live holder record above.

-- The length of a lease id (LEASE_ID_LEN of src/auth/token.h): a record whose
-- third field is not one is of the layout before (above).
local LEASE_ID_TEXT = 32

-- The live holder record of the two fields a script makes (decimal text) and
-- tail, the others from lease on as one text. The first try of an acquire
-- (lock_acquire_fast.lua) gets its tail whole from the gateway
-- (src/lease/lease_result.c lease_holder_tail).
local function holder_join(fence, granted_at, tail)
  return fence .. ' ' .. granted_at .. ' ' .. tail
end

-- The live holder record of the given fields (numbers as decimal text).
local function holder_text(lease, fence, ttl, max_hold, granted_at, claimed, inst, attach, rid, owner)
  return holder_join(fence, granted_at, lease .. ' ' .. ttl .. ' ' .. max_hold .. ' ' .. claimed .. ' ' .. inst ..
                     ' ' .. attach .. ' ' .. (rid == '' and '0' or string.format('%d', #rid)) .. ' ' .. rid .. owner)
end

-- The fields of a live holder record raw (a table, the numbers as decimal text), or nil when raw is no
-- live holder (false: no key; an end's record).
local function holder_read(raw)
  if not raw then return nil end
  local fence, granted_at, lease, ttl, max_hold, claimed, inst, attach, n, rest =
    string.match(raw, '^(%d+) (%d+) (%x+) (%d+) (%d+) (%d) (%x*) (%x*) (%d+) (.*)$')
  if not fence or #lease ~= LEASE_ID_TEXT then -- the layout before
    lease, fence, ttl, max_hold, granted_at, claimed, inst, attach, n, rest =
      string.match(raw, '^(%x+) (%d+) (%d+) (%d+) (%d+) (%d) (%x*) (%x*) (%d+) (.*)$')
    if not lease then return nil end
  end
  n = tonumber(n)
  return {lease = lease, fence = fence, ttl = ttl, max_hold = max_hold, granted_at = granted_at,
          claimed = claimed, inst = inst, attach = attach, rid = string.sub(rest, 1, n),
          owner = string.sub(rest, n + 1)}
end

-- True if raw is a live holder record that holder_read reads, told by its
-- layout alone: two pattern searches with one capture, where holder_read makes
-- ten and a table (a lean script that only needs to know a lease holds).
local function holder_readable(raw)
  if not raw then return false end
  local lease = string.match(raw, '^%d+ %d+ (%x+) %d+ %d+ %d %x* %x* %d+ ')
  if lease and #lease == LEASE_ID_TEXT then return true end
  return string.find(raw, '^%x+ %d+ %d+ %d+ %d+ %d %x* %x* %d+ ') ~= nil
end

-- What holder_brief reads of a lock's holder record, and of one of the layout
-- before; of a semaphore's first holder record (below), likewise.
local HOLDER_BRIEF = {'^(%d+) (%d+) (%x+) (%d+) ', '^(%x+) (%d+) (%d+) %d+ (%d+) '}
local FIRST_HOLDER_BRIEF = {'^=%d+ (%d+) (%d+) (%x+) (%d+) ', '^=%d+ (%x+) (%d+) (%d+) %d+ (%d+) '}

-- What a release needs of a live holder record raw: {lease, fence, ttl,
-- granted_at} (decimal text), or nil when raw is no live holder; four
-- captures where holder_read makes ten and a string.sub. first:
-- FIRST_HOLDER_BRIEF for a semaphore's first holder record, nil for a lock's.
local function holder_brief(raw, first)
  if not raw then return nil end
  local brief = first or HOLDER_BRIEF
  local fence, granted_at, lease, ttl = string.match(raw, brief[1])
  if not fence or #lease ~= LEASE_ID_TEXT then -- the layout before
    lease, fence, ttl, granted_at = string.match(raw, brief[2])
    if not lease then return nil end
  end
  return {lease = lease, fence = fence, ttl = ttl, granted_at = granted_at}
end

-- What claimed_brief reads of a lock's holder record; of a semaphore's first
-- holder record (below), likewise.
local CLAIMED_BRIEF = '^(%d+) (%d+) (%x+) (%d+) (%d+) 1 %x* %x* (%d+) ()'
local FIRST_CLAIMED_BRIEF = '^=%d+ (%d+) (%d+) (%x+) (%d+) (%d+) 1 %x* %x* (%d+) ()'

-- What a renewal needs of a claimed holder record raw, which it leaves as it
-- is: the fence, granted_at, lease, ttl and max_hold (decimal text) and the
-- request_id ('' for none), six captures where holder_read makes ten; nothing
-- for any other record (the layout before among them), which the caller reads
-- whole. first: FIRST_CLAIMED_BRIEF for a semaphore's first holder record, nil
-- for a lock's.
local function claimed_brief(raw, first)
  if not raw then return nil end
  local fence, granted_at, lease, ttl, max_hold, n, at = string.match(raw, first or CLAIMED_BRIEF)
  if not fence or #lease ~= LEASE_ID_TEXT then return nil end
  local rid = n == '0' and '' or string.sub(raw, at, at + tonumber(n) - 1)
  return fence, granted_at, lease, ttl, max_hold, rid
end

-- The record of h (a holder_read table) with claimed and attach set anew.
local function holder_rewrite(h, claimed, attach)
  return holder_text(h.lease, h.fence, h.ttl, h.max_hold, h.granted_at, claimed, h.inst, attach, h.rid, h.owner)
end

-- Starts the full lease of a lock's granted-but-unclaimed holder h (holder_read) in
-- its key k.h, on behalf of the connection attach, for its ttl up to its hold deadline
-- (claim_ttl), and keeps its request_id for as long as it holds (k.rids, k.rid_until:
-- lib_lease.lua rid_extend_set). Returns the expiry time.
local function holder_claim(k, h, now, attach)
  local ttl = claim_ttl(h.ttl, h.granted_at, h.max_hold, now)
  redis.call('SET', k.h, holder_rewrite(h, '1', attach), 'PX', decimal(ttl))
  rid_extend_set(k, h.rid, now + ttl)
  return now + ttl
end

-- The reply for holder h (holder_read) that holds the lock until expires_at.
local function holder_granted_reply(h, expires_at)
  return lease_reply('granted', nil, R_LEASE, h.lease, R_FENCE, h.fence,
                     R_TTL, h.ttl, R_EXPIRES_AT, decimal(expires_at))
end

-- The record of a semaphore's first holder of the semaphore's limit (decimal
-- text) and the live holder record of the other fields (holder_join).
local function first_holder_join(limit, fence, granted_at, tail)
  return '=' .. limit .. ' ' .. fence .. ' ' .. granted_at .. ' ' .. tail
end

-- True if raw, the limit key's value as read, is a first holder record
-- (first_holder_join), not a limit alone or an end's record.
local function is_first_holder(raw)
  return raw and string.byte(raw, 1) == 61 -- '='
end

-- The limit (decimal text) and the holder_read fields of a semaphore's first
-- holder record raw (the limit key as read), or nil when raw is none (false:
-- no key; a limit alone; an end's record).
local function first_holder_read(raw)
  if not is_first_holder(raw) then return nil end
  local limit, rest = string.match(raw, '^=(%d+) (.*)$')
  if not limit then return nil end
  return limit, holder_read(rest)
end
