-- lanes64_payment: bench/bykey's handler. 64 lanes, each entry waiting 1 ms
-- on the host's clock (ls.sleep) before its ack; by_key as BENCH_BY_KEY says
-- (1: ordered by the partition-key header, 64 accounts in the payload).
local ls = require "luastream"

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "200"),
  workers = 64,
  by_key = os.getenv("BENCH_BY_KEY") == "1",
  handle = function()
    ls.sleep(1)
    return ls.ack()
  end,
}
