-- reply_payment: bench/instructions scenario (b), a handler that answers on
-- another stream: ls.reply writes the reply with the ack (the outcome script).
local ls = require "luastream"

local stream = os.getenv("BENCH_STREAM") or "bench"

return {
  stream = stream,
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  reply_to = stream .. ".out",
  handle = function(payment)
    return ls.reply({ payment_id = payment.id, suspicious = payment.amount_cents > 1000000 })
  end,
}
