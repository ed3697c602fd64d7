-- Recovery before Redis 8.4: a second subscription on the ledger group reads
-- only payments left pending for at least MIN_IDLE by a stopped worker
-- (XAUTOCLAIM), beside post_new_payment.lua, which reads the new ones.
local ls = require "luastream"

local MIN_IDLE = 30000 -- ms; longer than the slowest posting ever takes

return {
  stream = "payments",
  group = "ledger",
  read = "reclaim",
  min_idle = MIN_IDLE,

  handle = function(payment, ctx)
    -- A reclaimed delivery counts itself: the first recovery reports at least 1.
    local deliveries = ctx.headers[ls.DELIVERY_COUNT_HEADER] or "1"
    ls.log.warn("payment recovered from a stopped worker",
      { payment_id = payment.id, deliveries = deliveries })
    return ls.ack()
  end,
}
