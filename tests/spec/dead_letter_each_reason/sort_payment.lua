-- For the retries spec: does to each payment what its `action` says, so every
-- dead-letter reason can be produced: "reject" (with `why`, or without),
-- "retry", "raise"; anything else is posted. Small max_body for too-large.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  read = "claiming",
  min_idle = "30s",
  max_deliveries = 2,
  max_body = 200,
  dead_letter = "payments.dead",

  handle = function(payment)
    if payment.action == "reject" then return ls.reject(payment.why) end
    if payment.action == "retry" then return ls.retry() end
    if payment.action == "raise" then error("ledger unavailable for payment " .. payment.id) end
    return ls.ack()
  end,
}
