-- For the retries spec: publishes two ledger entries and replies. A payment
-- with `pause` waits that long (on the host's clock) between publishing and
-- replying; one with `fail` raises after publishing, one with `defer` asks for
-- a delay after publishing.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  reply_to = "payments.posted",

  handle = function(payment, ctx)
    ctx:publish("ledger.debits", { payment_id = payment.id, amount_cents = payment.amount_cents })
    ctx:publish("ledger.credits", { payment_id = payment.id, amount_cents = payment.amount_cents })
    if payment.pause then ls.sleep(payment.pause) end
    if payment.fail then error("ledger write refused for payment " .. payment.id) end
    if payment.defer then return ls.retry_after(payment.defer) end
    return ls.reply({ payment_id = payment.id, posted = true })
  end,
}
