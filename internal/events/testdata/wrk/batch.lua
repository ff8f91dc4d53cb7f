-- wrk -s batch.lua: POST /api/v1/events with 100 events per request (NDJSON).
-- Ids and times are left to the server; each request is 100 new events.
-- Usage: wrk -t2 -c32 -d10s -s batch.lua http://127.0.0.1:8080
local n = tonumber(os.getenv("EVENTS_PER_REQUEST") or "100")
local lines = {}
for i = 1, n do
  lines[i] = string.format('{"name":"app.click","source":{"device":"dev-%04d","client":"ios-2.3"},"num":{"x":%d,"y":%d},"str":{"screen":"main"}}', i % 50, i, i * 7 % 300)
end
wrk.method = "POST"
wrk.path = "/api/v1/events"
wrk.headers["Content-Type"] = "application/x-ndjson"
wrk.body = table.concat(lines, "\n") .. "\n"
