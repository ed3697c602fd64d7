-- write_payment: bench/throughput client luastream-write, a handler that posts
-- each entry to a balance with ctx:write (one HINCRBY, applied with the ack by
-- the outcome script, exactly once), then acks.
local ls = require "luastream"

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  handle = function(payment, ctx)
    ctx:write("HINCRBY", "balances", payment.account, payment.amount_cents)
    return ls.ack()
  end,
}
