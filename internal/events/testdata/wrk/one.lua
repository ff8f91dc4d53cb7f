-- wrk -s one.lua: POST /api/v1/events with one event per request.
-- Usage: wrk -t2 -c32 -d10s -s one.lua http://127.0.0.1:8080
wrk.method = "POST"
wrk.path = "/api/v1/events"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name":"app.click","source":{"device":"dev-0042","client":"ios-2.3"},"num":{"x":12,"y":34},"str":{"screen":"main"}}'
