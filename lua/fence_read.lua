-- SPDX-License-Identifier: Apache-2.0
-- fence_read.lua: the last fence issued, for fence recovery.
-- KEYS[1] "fg:fence"
-- Returns JSON {fence} (-1 when the sequence is missing).
return cjson.encode({fence = tonumber(redis.call('GET', KEYS[1]) or '-1')})
