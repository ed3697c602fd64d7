-- For the consumers spec: a `new` subscription that logs who handled what.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  handle = function(payment, ctx)
    ls.log.info("handled", { entry_id = ctx.id, consumer = ctx.consumer })
  end,
}
