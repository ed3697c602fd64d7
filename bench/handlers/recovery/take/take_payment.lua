-- take_payment: bench/recovery's second host. Claims what the killed host left
-- pending once idle for min_idle ($BENCH_MIN_IDLE ms; Redis 7.0 has no
-- XREADGROUP CLAIM, hence claim_fallback) and acks each payment.
local ls = require "luastream"

local total = 0

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  read = "claiming",
  claim_fallback = true,
  min_idle = tonumber(os.getenv("BENCH_MIN_IDLE") or "1000"),
  handle = function(payment)
    total = total + payment.amount_cents
    return ls.ack()
  end,
}
