-- ack_claiming: ack_payment.lua (the plain ack handler) on a claiming read
-- (bench/throughput's luastream-claiming): Redis 7.0 has no XREADGROUP
-- CLAIM, hence claim_fallback. min_idle ($BENCH_MIN_IDLE ms, default 3000)
-- makes the heartbeat re-stamp the entries held every min_idle / 3.
local ls = require "luastream"

local total = 0 -- the field read, kept so that the read is not optimised away

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  read = "claiming",
  claim_fallback = true,
  min_idle = tonumber(os.getenv("BENCH_MIN_IDLE") or "3000"),
  handle = function(payment)
    total = total + payment.amount_cents
    return ls.ack()
  end,
}
