-- lanes_payment: bench/instructions scenario (c), the ack handler on 8 lanes
-- ordered by the partition-key header (64 accounts in the benchmark payload).
local ls = require "luastream"

local total = 0

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  workers = 8,
  by_key = true,
  handle = function(payment)
    total = total + payment.amount_cents
    return ls.ack()
  end,
}
