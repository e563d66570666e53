-- uses: lib_text.lua
-- SPDX-License-Identifier: Apache-2.0
-- rw_audit_dead.lua: moves an audit stream entry that cannot be stored in
-- Postgres to the dead-letter stream, so that the drain goes on past it. The
-- dead letters keep the entry's fields (bytes that are not UTF-8 text written
-- as \xNN), its id and why it was refused, for an operator (fencegate
-- audit-dead-letters); the stream is capped near AUDIT_DEAD_LETTERS_MAX entries.
-- KEYS: audit dead
--   KEY_AUDIT, KEY_AUDIT_DEAD
-- ARGV: id error
--   the entry id, why it could not be stored
-- Returns JSON {moved = 0 | 1}.
local e = redis.call('XRANGE', KEYS[1], A_id, A_id)
if #e == 0 then return cjson.encode({moved = 0}) end
local fields = e[1][2]
for i = 1, #fields do fields[i] = text_escaped(fields[i]) end
fields[#fields + 1] = 'source_id'
fields[#fields + 1] = A_id
fields[#fields + 1] = 'error'
fields[#fields + 1] = A_error
redis.call('XADD', KEYS[2], 'MAXLEN', '~', AUDIT_DEAD_LETTERS_MAX, '*', unpack(fields))
redis.call('XDEL', KEYS[1], A_id)
return cjson.encode({moved = 1})
