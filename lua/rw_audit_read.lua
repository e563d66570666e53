-- uses: lib_text.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_audit_read.lua: the oldest entries of an audit stream, for the drain into
-- Postgres (entries stay until acknowledged) or for listing the dead letters.
-- KEYS: stream
--   KEY_AUDIT (or KEY_AUDIT_DEAD)
-- ARGV: count after
-- flags: no-writes
--   a read: it runs while Redis is out of memory too
--   count: how many entries at most; after: the id of the entry to read after, "" from the start
-- Returns JSON {entries = [{id, fields = {name = value, ...}} or {id, bad = true}, ...]}.
-- An entry with a field that is not UTF-8 text (or holds NUL) comes as {id, bad}
-- without its fields: its bytes could not travel as JSON, and Postgres would
-- refuse them; the drain moves it to the dead letters instead of stopping at it.

local from = A_after == '' and '-' or '(' .. A_after
local raw = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', tonumber(A_count))
local entries = {}
for i, e in ipairs(raw) do
  local fields, ok = {}, true
  for j = 1, #e[2], 2 do
    if not (utf8_text(e[2][j]) and utf8_text(e[2][j + 1])) then ok = false end
    fields[e[2][j]] = e[2][j + 1]
  end
  if ok then entries[i] = {id = e[1], fields = fields} else entries[i] = {id = e[1], bad = true} end
end
if #entries == 0 then return '{"entries":[]}' end
return cjson.encode({entries = entries})
