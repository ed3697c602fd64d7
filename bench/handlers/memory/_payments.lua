-- The subscription of bench/memory's two handler files, on the stream
-- BENCH_STREAM-<suffix>: 8 lanes by key, up to 500 entries in flight, each
-- handler waiting 20 ms (ls.sleep) before its ack.
local ls = require "luastream"

return function(suffix)
  local total = 0
  return {
    stream = (os.getenv("BENCH_STREAM") or "bench") .. "-" .. suffix,
    group = os.getenv("BENCH_GROUP") or "bench",
    batch = 500,
    workers = 8,
    by_key = true,
    handle = function(payment)
      ls.sleep(20)
      total = total + payment.amount_cents
      return ls.ack()
    end,
  }
end
