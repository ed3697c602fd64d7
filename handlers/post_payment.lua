-- The ledger group posts each payment. One claiming read takes the payments
-- that a stopped worker left pending (idle at least MIN_IDLE) and then new
-- ones, so the subscription that posts new payments also recovers abandoned
-- ones. Needs Redis 8.4 or later; before-8.4/ holds the same service for
-- older servers.
local ls = require "luastream"

-- Longer than the slowest posting ever takes: an entry idle this long belongs
-- to no live worker.
local MIN_IDLE = 30000 -- ms

return {
  stream = "payments",
  group = "ledger",
  read = "claiming",
  min_idle = MIN_IDLE,
  workers = 8,
  by_key = true,

  handle = function(payment, ctx)
    local earlier_deliveries = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "0"
    if payment.account:find("^migrating%-") then
      ls.log.warn("account locked, payment left pending",
        { payment_id = payment.id, earlier_deliveries = earlier_deliveries })
      return ls.retry()
    end
    ls.log.info("payment posted", { payment_id = payment.id, earlier_deliveries = earlier_deliveries })
    return ls.ack()
  end,
}
