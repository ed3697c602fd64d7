-- For the lanes spec: posts each payment after the pause it names, waiting
-- on the host's clock.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  workers = 8,
  by_key = true,

  handle = function(payment)
    ls.sleep(payment.pause_ms)
    ls.log.info("payment posted", { payment_id = payment.id, account = payment.account })
  end,
}
