-- For the retries spec: defers every payment by ls.backoff (1s, doubling, at
-- most 5s, no jitter) and logs each delay, until max_deliveries sets it aside.
local ls = require "luastream"

local backoff = ls.backoff { base = "1s", factor = 2, max = "5s" }

return {
  stream = "payments",
  group = "ledger",
  max_deliveries = 5,
  dead_letter = "payments.dead",

  handle = function(payment, ctx)
    local delay = backoff(ctx)
    ls.log.info("payment deferred", { entry_id = ctx.id, delay_ms = delay })
    return ls.retry_after(delay)
  end,
}
