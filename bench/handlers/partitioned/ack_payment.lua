-- ack_payment on a partitioned stream: bench/cluster. BENCH_PARTITIONS
-- partitions of BENCH_STREAM, read from the beginning; the handler reads one
-- field and acks, as bench/handlers/ack_payment.lua does.
local ls = require "luastream"

local total = 0

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  start = "beginning",
  partitions = tonumber(os.getenv("BENCH_PARTITIONS") or "16"),
  batch = tonumber(os.getenv("BENCH_BATCH") or "500"),
  handle = function(payment)
    total = total + payment.amount_cents
    return ls.ack()
  end,
}
