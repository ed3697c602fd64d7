-- For the retries spec: on a `new` read, defers a payment by its `delay`
-- (ls.retry_after) until it has been delivered `delays` times (1 when not
-- given), then posts it.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  max_deliveries = 3,
  dead_letter = "payments.dead",

  handle = function(payment, ctx)
    local before = tonumber(ctx.headers[ls.DELIVERY_COUNT_HEADER] or "0")
    if before < (payment.delays or 1) then return ls.retry_after(payment.delay) end
    return ls.ack()
  end,
}
