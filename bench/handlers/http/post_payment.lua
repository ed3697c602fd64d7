-- post_payment: bench/http's luastream client, a handler that POSTs each
-- entry's body, the raw `data` field as the producer wrote it, to an HTTP
-- service (BENCH_HTTP_URL) with ls.http.request and acks on status 200; any
-- other status or a transport error sends the entry round again. The
-- requests of the lanes (BENCH_HTTP_CONCURRENCY, default 64) are in flight
-- at once over kept-alive connections: the same requests as
-- bench/http_client.c with the same concurrency.
local ls = require "luastream"

local url = os.getenv("BENCH_HTTP_URL") or "http://127.0.0.1:8080/hook"
local headers = { ["content-type"] = "application/json" }

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  workers = tonumber(os.getenv("BENCH_HTTP_CONCURRENCY") or "64"),
  handle = function(_, ctx)
    local res, err = ls.http.request {
      method = "POST", url = url, headers = headers, body = ctx.fields.data, timeout = "5s",
    }
    if res and res.status == 200 then return ls.ack() end
    -- bench/http counts these lines: a run with any of them is reported failed.
    ls.log.warn("http post failed", { status = res and res.status, err = err })
    return ls.retry()
  end,
}
