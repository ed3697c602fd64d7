-- For the retry trim spec: retries each payment once (a copy on the group's
-- retry stream), then acks the copy.
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  handle = function(payment, ctx)
    if ctx.deliveries == 0 then return ls.retry() end
    return ls.ack()
  end,
}
