-- get_payment: bench/throughput client luastream-get, a handler that reads one
-- key of Redis per entry (ls.redis.call "GET") on 64 lanes, then acks. The
-- calls of the lanes are pipelined on the host's calls connection.
local ls = require "luastream"

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  workers = 64,
  handle = function(payment)
    ls.redis.call("GET", "limit:" .. payment.account)
    return ls.ack()
  end,
}
