-- The fraud group screens every payment, from the beginning of the stream, and
-- replies on payments.screened. Each group has its own cursor, so fraud reads
-- every payment the ledger reads, and neither slows the other.
local ls = require "luastream"

return {
  stream = "payments",
  group = "fraud",
  start = "beginning", -- a new group screens the payments already on the stream
  reply_to = "payments.screened",
  -- What a payment on the stream is (docs/handlers.md, "Message schemas"):
  -- a payment that is not one never reaches handle.
  schema = {
    type = "object",
    required = { "id", "amount_cents" },
    properties = {
      id = { type = { "integer", "string" }, description = "the producer's id of the payment" },
      account = { type = "string", minLength = 1, description = "the paying account, also the partition key" },
      amount_cents = { type = "integer", description = "the amount in cents; negative for a refund" },
    },
  },
  reply_schema = {
    type = "object",
    required = { "payment_id", "suspicious" },
    properties = { suspicious = { type = "boolean" } },
  },

  handle = function(payment)
    local suspicious = payment.amount_cents > 1000000
    ls.log.info("payment screened", { payment_id = payment.id, suspicious = suspicious })
    return ls.reply({ payment_id = payment.id, suspicious = suspicious })
  end,
}
