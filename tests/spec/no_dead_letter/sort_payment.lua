-- For the retries spec: dead_letter_each_reason/sort_payment.lua without a
-- dead_letter stream.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  read = "claiming",
  min_idle = "30s",
  max_deliveries = 2,
  max_body = 200,

  handle = function(payment)
    if payment.action == "reject" then return ls.reject(payment.why) end
    if payment.action == "retry" then return ls.retry() end
    if payment.action == "raise" then error("ledger unavailable for payment " .. payment.id) end
    return ls.ack()
  end,
}
