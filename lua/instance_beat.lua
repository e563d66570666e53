-- SPDX-License-Identifier: Apache-2.0
-- instance_beat.lua: keeps a gateway process marked alive. Its waiters stay in
-- the queues only while this key lives, so a dead process's waiters are dropped
-- within one waiter lease.
-- KEYS[1] "fg:inst:"..id
-- ARGV[1] lease ms
-- Returns JSON {ok=true}.
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return cjson.encode({ok = true})
