-- SPDX-License-Identifier: Apache-2.0
-- lib_sem_holder.lua: the record a semaphore keeps per holder in its data hash
-- (lib_sem.lua), JSON text (prepended to every script whose first line names
-- it; never called on its own). It touches no key itself.
--
--   {"fence":F,"ttl":T,"max_hold":M,"granted_at":G,"claimed":C,"rid":R,"inst":I,"attach":A,"owner":O}
--   numbers in ms (G Redis time; the hold ends at G + M at the latest, M kept as asked so that the
--   first try prints no sum); claimed 0 for a grant its gateway has not claimed yet, else 1; rid the
--   request_id ("" for none), inst the gateway that asked and attach its connection (hex), owner free text.
-- Readers decode it (cjson), but for the release, which reads its numbers off the text (holder_numbers).

-- The record of the fields up to granted_at (decimal text) and tail, the
-- fields from claimed on as JSON text, from its comma to the closing brace.
local function record_join(fence, ttl, max_hold, granted_at, tail)
  return '{"fence":' .. fence .. ',"ttl":' .. ttl .. ',"max_hold":' .. max_hold .. ',"granted_at":' ..
         granted_at .. tail
end

-- A holder record of the given fields, built by hand, the numbers as decimal
-- text: cjson prints every number through the C library's floating-point
-- printing, many times the cost of decimal(), and a script that has a number
-- as text already passes it on.
local function holder_json(fence, owner, ttl, max_hold, granted_at, claimed, rid, inst, attach)
  return record_join(fence, ttl, max_hold, granted_at, ',"claimed":' .. claimed .. ',"rid":' .. json_string(rid) ..
                     ',"inst":' .. json_id(inst) .. ',"attach":' .. json_id(attach) .. ',"owner":' ..
                     json_string(owner) .. '}')
end

-- holder_json of a decoded holder record (holder_of), whose numbers are numbers.
local function record_json(rec)
  return holder_json(decimal(rec.fence), rec.owner, decimal(rec.ttl), decimal(rec.max_hold),
                     decimal(rec.granted_at), decimal(rec.claimed), rec.rid, rec.inst, rec.attach)
end

-- The fence, ttl and granted_at of holder record raw (JSON text), read off the
-- text as decimal text where record_join wrote them at a third of the cost of
-- decoding it; a record of another layout is decoded (fence and ttl printed as
-- decimal text, granted_at a number, or nil in a record that lacks it).
local function holder_numbers(raw)
  local fence, ttl, granted_at = string.match(raw, '^{"fence":(%d+),"ttl":(%d+),"max_hold":%d+,"granted_at":(%d+)[,}]')
  if fence then return fence, ttl, granted_at end
  local rec = cjson.decode(raw)
  return decimal(rec.fence), decimal(rec.ttl), rec.granted_at
end

-- What a renewal needs of holder record raw, read off the text where
-- record_join wrote it: the fence, ttl, max_hold and granted_at (decimal text)
-- of a claimed holder without a request_id, whose record a renewal leaves as
-- it is; nothing for any other record, which the caller decodes.
local function claimed_numbers(raw)
  return string.match(raw, '^{"fence":(%d+),"ttl":(%d+),"max_hold":(%d+),"granted_at":(%d+),"claimed":1,"rid":""[,}]')
end
