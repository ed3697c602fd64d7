-- ack_rated: ack_payment.lua (the plain ack handler) with the field rate set
-- far above what the host reaches (bench/throughput's luastream-rated): what
-- taking permits costs (one EVAL per chunk of a 20th of a second's permits,
-- each read capped by the permits held). $BENCH_RATE overrides the rate.
local ls = require "luastream"

local total = 0 -- the field read, kept so that the read is not optimised away

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  rate = os.getenv("BENCH_RATE") or "10000000/s",
  handle = function(payment)
    total = total + payment.amount_cents
    return ls.ack()
  end,
}
