-- uses: lib_lease.lua lib_holder.lua
-- SPDX-License-Identifier: Apache-2.0
-- lease_list.lua: one page of the live locks or semaphores whose names start
-- with a prefix, in name order, read from the listing index (lib_lease.lua).
-- Never walks the whole index: it looks at most at `budget` names, and drops
-- from the index those it finds idle on the way (so a listing also prunes).
-- Read-only otherwise: expired holders are not counted but left for the next
-- transition. Never returns a token or lease id.
-- KEYS: index
--   KEY_LOCK_INDEX or KEY_SEM_INDEX
-- ARGV: kind prefix after limit budget shown upto
--   kind "l" (locks) or "s" (semaphores); after: the last name of the previous
--   page, "" for the first; limit: 0 only prunes; budget: names looked at;
--   shown: holders shown per semaphore; upto: the last name to look at, ""
--   for none (a page merged from the index of every slot of a cluster, or one
--   name alone for a key scoped to it)
-- It builds the keys of the locks or semaphores it lists from the prefixes and
-- suffixes of src/store/backend/redis_keys.h (the other key a script builds
-- is the one a first try moves an end's record to, lib_lease.lua end_move).
-- Returns JSON {items = [...], next = <name to continue after> (absent at the end),
-- pruned = <idle names dropped> (only when limit is 0)}:
--   lock:      {name, held, fence, owner, pttl, waiting}
--   semaphore: {name, limit, holders, waiting, leases = [{fence, owner, pttl}]}
local kind, prefix, after = A_kind, A_prefix, A_after
local limit, budget, shown = tonumber(A_limit), tonumber(A_budget), tonumber(A_shown)
local index = KEYS[1]
local now = now_ms()

-- Status of lock name, or nil when it is idle.
local function lock_item(name)
  local base = KEY_LOCK_PREFIX .. name .. KEY_TAG_END
  local h = holder_read(redis.call('GET', base .. KEY_SUFFIX_HOLDERS))
  local waiting = redis.call('ZCARD', base .. KEY_SUFFIX_QUEUE)
  if not h and waiting == 0 then return nil end
  local item = {name = name, held = h ~= nil, waiting = waiting}
  if h then
    item.fence = tonumber(h.fence)
    item.owner = h.owner
    item.pttl = redis.call('PTTL', base .. KEY_SUFFIX_HOLDERS)
  end
  return item
end

-- Status of semaphore name with its first `shown` live holders, or nil when idle.
local function sem_item(name)
  local base = KEY_SEM_PREFIX .. name .. KEY_TAG_END
  local lkey = base .. KEY_SUFFIX_LIMIT
  local lraw = redis.call('GET', lkey)
  local first_limit, h = first_holder_read(lraw) -- its first holder kept in the limit key (lib_sem.lua)
  if h then
    local leases = {}
    if shown > 0 then leases[1] = {fence = tonumber(h.fence), owner = h.owner, pttl = redis.call('PTTL', lkey)} end
    return {name = name, limit = tonumber(first_limit), holders = 1, waiting = 0, leases = leases}
  end
  local hkey = base .. KEY_SUFFIX_HOLDERS
  local live = redis.call('ZRANGEBYSCORE', hkey, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, shown)
  local holders = redis.call('ZCOUNT', hkey, '(' .. now, '+inf')
  local waiting = redis.call('ZCARD', base .. KEY_SUFFIX_QUEUE)
  if holders == 0 and waiting == 0 then return nil end
  local leases = {}
  for i = 1, #live, 2 do
    local raw = redis.call('HGET', base .. KEY_SUFFIX_HOLDER_DATA, live[i])
    local rec = raw and cjson.decode(raw) or {}
    leases[#leases + 1] = {fence = rec.fence, owner = rec.owner, pttl = tonumber(live[i + 1]) - now}
  end
  return {name = name, limit = tonumber(lraw),
          holders = holders, waiting = waiting, leases = leases}
end

local item_of = kind == 's' and sem_item or lock_item
local low = '[' .. prefix
if after ~= '' and after >= prefix then low = '(' .. after end
local high = prefix == '' and '+' or '[' .. prefix .. '\255'
if A_upto ~= '' then high = '[' .. A_upto end
local names = redis.call('ZRANGEBYLEX', index, low, high, 'LIMIT', 0, budget)

local items, last, pruned = {}, nil, 0
for _, name in ipairs(names) do
  if #items >= limit and limit > 0 then break end
  local item = item_of(name)
  if item then
    if limit > 0 then items[#items + 1] = item end
  else
    redis.call('ZREM', index, name)
    pruned = pruned + 1
  end
  last = name
end
local more = #names == budget or (limit > 0 and #items >= limit and last ~= names[#names])
return cjson.encode({items = items, next = more and last or nil, pruned = limit == 0 and pruned or nil})
