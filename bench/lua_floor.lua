#!lua name=lua_floor
-- SPDX-License-Identifier: Apache-2.0
-- bench/lua_floor.lua - the throwaway lock pairs of the Lua floor, one promise more each rung (library
-- "lua_floor"): counted under callgrind by bench/lua_floor, served over HTTP by bench/floor.c's fcall
-- backend (bench/side_by_side.py's floor sides). Never the gateway's scripts.
local function acquire(keys, args, with_time, with_index)
  local now = with_time and redis.call('TIME') or nil
  local fence = redis.call('INCR', keys[2])
  if not redis.call('SET', keys[1], fence .. ' ' .. args[1], 'NX', 'PX', args[2]) then return 0 end
  if with_index then redis.call('ZADD', keys[3], args[2], keys[1]) end
  if now then return fence .. ' ' .. now[1] .. now[2] end
  return fence .. ''
end
local function release(keys, args, with_record, with_time, with_index)
  if redis.call('GET', keys[1]) ~= args[1] then return 0 end
  if with_index then redis.call('ZREM', keys[2], keys[1]) end
  if not with_record then return redis.call('DEL', keys[1]) end
  local ended = 'released ' .. args[1]
  if with_time then
    local now = redis.call('TIME')
    ended = ended .. ' ' .. now[1] .. now[2]
  end
  redis.call('SET', keys[1], ended, 'PX', 60000)
  return 1
end
local function sem_acquire(keys, args)
  local held = redis.call('MGET', keys[1], keys[3])
  if held[1] or held[2] then return 0 end
  local now = redis.call('TIME')
  local fence = redis.call('INCR', keys[2])
  redis.call('SET', keys[1], '=' .. args[3] .. ' ' .. fence .. ' ' .. args[1], 'PX', args[2])
  return fence .. ' ' .. now[1] .. now[2]
end
redis.register_function('sem_acquire_3', sem_acquire)
redis.register_function('acquire_1', function(k, a) return acquire(k, a, false, false) end)
redis.register_function('acquire_2', function(k, a) return acquire(k, a, true, false) end)
redis.register_function('acquire_5', function(k, a) return acquire(k, a, true, true) end)
redis.register_function('release_1', function(k, a) return release(k, a, false, false, false) end)
redis.register_function('release_3', function(k, a) return release(k, a, true, false, false) end)
redis.register_function('release_4', function(k, a) return release(k, a, true, true, false) end)
redis.register_function('release_5', function(k, a) return release(k, a, true, true, true) end)
