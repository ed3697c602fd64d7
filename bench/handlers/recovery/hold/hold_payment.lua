-- hold_payment: bench/recovery's first host. Reads 1,000 payments in one read
-- and never finishes one (ls.sleep for an hour): they stay pending under this
-- consumer until bench/recovery kills the host with SIGKILL.
local ls = require "luastream"

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = 1000,
  handle = function()
    ls.sleep("1h")
    return ls.ack()
  end,
}
