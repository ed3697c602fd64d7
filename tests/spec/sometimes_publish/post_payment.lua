-- For the readiness spec: publishes to `audit` when the payment asks for it,
-- acks every payment.
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  handle = function(payment, ctx)
    if payment.audit then ctx:publish("audit", { id = payment.id }) end
    return ls.ack()
  end,
}
