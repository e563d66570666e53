-- fence_read.lua: what fence recovery needs to know of the sequence.
-- KEYS[1] "fg:fence", KEYS[2] "fg:fence_origin"
-- Returns JSON {fence (-1 when the sequence is missing), trusted (the sequence
-- has not gone back since the origin was set, lua/fence_check.lua)}.
local v = redis.call('MGET', KEYS[1], KEYS[2])
return cjson.encode({fence = tonumber(v[1] or '-1'), trusted = v[1] ~= false and v[2] ~= false})
