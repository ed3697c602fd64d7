-- For the forged-headers spec: the ledger group retries a payment that asks
-- for it once (its copy comes back on payments:retry:ledger), acks the rest.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  max_deliveries = 3,
  dead_letter = "payments.dead",

  handle = function(payment, ctx)
    if payment.retry and ctx.headers[ls.ORIGINAL_ID_HEADER] ~= ctx.id and
        ctx.headers[ls.DELIVERY_COUNT_HEADER] == nil then
      return ls.retry()
    end
  end,
}
