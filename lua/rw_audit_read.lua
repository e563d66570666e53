-- rw_audit_read.lua: the oldest entries of the audit stream of stale Redis
-- writes, for the drain into Postgres (entries stay until acknowledged).
-- KEYS[1] "fg:audit"
-- ARGV[1] how many entries at most
-- Returns JSON {entries = [{id, fields = {name = value, ...}}, ...]}.
local raw = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', tonumber(ARGV[1]))
local entries = {}
for i, e in ipairs(raw) do
  local fields = {}
  for j = 1, #e[2], 2 do fields[e[2][j]] = e[2][j + 1] end
  entries[i] = {id = e[1], fields = fields}
end
if #entries == 0 then return '{"entries":[]}' end
return cjson.encode({entries = entries})
