-- For the retries spec: a handler that never comes back (as good as a host
-- killed by its own handler): it says which delivery it got, then waits an
-- hour on the host's clock, far past any spec's horizon. The entry is never
-- acked in time, so every claim counts.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  read = "claiming",
  min_idle = "30s",
  workers = 8, -- a hung lane must not hold back the next claim
  max_deliveries = 3,
  dead_letter = "payments.dead",

  handle = function(payment, ctx)
    ls.log.info("handler started", { entry_id = ctx.id, consumer = ctx.consumer,
      delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] })
    ls.sleep("1h")
  end,
}
