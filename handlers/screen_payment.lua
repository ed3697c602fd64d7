-- The fraud group screens every payment, from the beginning of the stream, and
-- replies on payments.screened. Each group has its own cursor, so fraud reads
-- every payment the ledger reads, and neither slows the other.
local ls = require "luastream"

return {
  stream = "payments",
  group = "fraud",
  start = "beginning", -- a new group screens the payments already on the stream
  reply_to = "payments.screened",

  handle = function(payment)
    local suspicious = payment.amount_cents > 1000000
    ls.log.info("payment screened", { payment_id = payment.id, suspicious = suspicious })
    return ls.reply({ payment_id = payment.id, suspicious = suspicious })
  end,
}
