-- The ledger group posts each new payment. Eight lanes keyed by account
-- (the partition-key header) post one account's payments in stream order
-- while different accounts proceed in parallel.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  workers = 8,
  by_key = true,

  handle = function(payment)
    ls.log.info("payment posted", { payment_id = payment.id, account = payment.account })
    return ls.ack()
  end,
}
