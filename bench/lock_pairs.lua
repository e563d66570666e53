-- lock_pairs.lua: wrk script for the lock benchmark. Each wrk thread has one
-- connection (run with -t N -c N) and loops acquire -> release on its lock:
-- "distinct" gives every connection its own name, "shared" one name for all
-- (acquires then queue with wait_ms). Counts completed pairs per thread.
--   wrk -t 16 -c 16 -d 10s -s bench/lock_pairs.lua http://127.0.0.1:PORT -- distinct PREFIX
-- PREFIX (default "wrkbench") keeps runs apart: a run that stops mid-pair
-- leaves its locks held until their ttl.
local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

function init(args)
  mode = args[1] or "distinct"
  local prefix = args[2] or "wrkbench"
  name = mode == "shared" and prefix or (prefix .. "-" .. id)
  token = nil
  pairs_done = 0
  failures = 0
  headers = {["Content-Type"] = "application/json"}
end

function request()
  if token == nil then
    return wrk.format("POST", "/v1/locks/" .. name .. "/acquire", headers,
                      '{"ttl_ms":10000,"wait_ms":60000}')
  end
  return wrk.format("POST", "/v1/locks/" .. name .. "/release", headers,
                    '{"token":"' .. token .. '"}')
end

function response(status, hdrs, body)
  if token == nil then
    if status == 200 then
      token = body:match('"token":"([^"]+)"')
    else
      failures = failures + 1
    end
  else
    token = nil
    if status == 200 then pairs_done = pairs_done + 1 else failures = failures + 1 end
  end
end

function done(summary, latency, requests)
  local total, failed = 0, 0
  for _, t in ipairs(threads) do
    total = total + t:get("pairs_done")
    failed = failed + t:get("failures")
  end
  local seconds = summary.duration / 1e6
  io.write(string.format("PAIRS %d %.1f %.0f %d\n", total, seconds, total / seconds, failed))
end
