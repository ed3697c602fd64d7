-- For the retries spec: hang_forever on a `new` subscription. A host that
-- dies with the entry running leaves it pending under its consumer name; the
-- same name, started again, reads its own pending list first and finds it.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  read = "new",
  max_deliveries = 3,
  dead_letter = "payments.dead",

  handle = function(payment, ctx)
    ls.log.info("handler started", { entry_id = ctx.id, consumer = ctx.consumer,
      delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] })
    ls.sleep("1h")
  end,
}
