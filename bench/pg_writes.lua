-- bench/pg_writes.lua - wrk script for bench/pg_writes.sh: fenced PATCH writes
-- to /v1/pg/bench_rows/{key}, all under one Fence-Token.
--   wrk ... -s bench/pg_writes.lua <url> -- <token> distinct|hot <rows>
-- distinct: each request picks a random row among <rows>; hot: always row "hot".
-- Prints "WRITES <ok>/s <non-2xx> <errors>" at the end.
local token, mode, rows

function init(args)
  token, mode, rows = args[1], args[2], tonumber(args[3])
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
end

function request()
  local key = mode == "hot" and "hot" or tostring(math.random(0, rows - 1))
  local body = '{"set":{"n":' .. math.random(0, 1000000) .. ',"note":"w"}}'
  return wrk.format("PATCH", "/v1/pg/bench_rows/" .. key,
    { ["Fence-Token"] = token, ["Content-Type"] = "application/json" }, body)
end

function done(summary, latency, requests)
  local bad = summary.errors.status
  local errs = summary.errors.connect + summary.errors.read + summary.errors.write +
      summary.errors.timeout
  local secs = summary.duration / 1e6
  io.write(string.format("WRITES %.0f %d %d p99_ms=%.2f\n", (summary.requests - bad - errs) / secs,
    bad, errs, latency:percentile(99) / 1000))
end
