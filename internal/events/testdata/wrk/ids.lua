-- wrk -s ids.lua: POST /api/v1/events with 14 events per request (NDJSON),
-- each with a client id of its own, as a retrying client sends them, so
-- that the collector remembers every one for deduplication.
-- Usage: wrk -t2 -c16 -d10s -s ids.lua http://127.0.0.1:8080
local n = tonumber(os.getenv("EVENTS_PER_REQUEST") or "14")
local threads = 0
local run = os.time()

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local seq = 0
function request()
  seq = seq + 1
  local lines = {}
  for i = 1, n do
    lines[i] = string.format('{"id":"%d-%d-%d-%d","name":"app.click","source":{"device":"dev-%04d","client":"ios-2.3"},"num":{"x":%d,"y":%d},"str":{"screen":"main"}}', run, tid, seq, i, i % 50, i, i * 7 % 300)
  end
  return wrk.format("POST", "/api/v1/events", {["Content-Type"] = "application/x-ndjson"}, table.concat(lines, "\n") .. "\n")
end
