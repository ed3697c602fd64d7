-- For the retries spec: the `reclaim` half (min_idle 30s). The first time it
-- takes a payment over it defers it by its `delay`; then it posts it.
-- delivery-count on reclaim counts this delivery: 2 on the first reclaim
-- (the failed `new` delivery before it).
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  read = "reclaim",
  min_idle = "30s",

  handle = function(payment, ctx)
    if ctx.headers[ls.DELIVERY_COUNT_HEADER] == "2" then return ls.retry_after(payment.delay) end
    return ls.ack()
  end,
}
