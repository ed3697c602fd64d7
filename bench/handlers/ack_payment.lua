-- ack_payment: the benchmark's handler (bench/throughput, bench/instructions).
-- The host decodes each payment (JSON in `data`); the handler reads one field
-- and acks: the same work as bench/raw_client.c does per entry.
-- BENCH_STREAM, BENCH_GROUP and BENCH_BATCH come from the bench scripts.
local ls = require "luastream"

local total = 0 -- the field read, kept so that the read is not optimised away

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  handle = function(payment)
    total = total + payment.amount_cents
    return ls.ack()
  end,
}
