-- For the retries spec: delay_on_new/defer_payment.lua on a claiming read
-- (min_idle 30s): a delay up to 30s keeps the entry pending, a longer one
-- moves it to the delay set.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  read = "claiming",
  min_idle = "30s",
  max_deliveries = 3,
  dead_letter = "payments.dead",

  handle = function(payment, ctx)
    local before = tonumber(ctx.headers[ls.DELIVERY_COUNT_HEADER] or "0")
    if before < (payment.delays or 1) then return ls.retry_after(payment.delay) end
    return ls.ack()
  end,
}
