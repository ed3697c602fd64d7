-- For the consumers spec: like consumers/post.lua, one lane, each entry
-- taking a second, so entries wait in the lane behind the one running.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  workers = 1,
  handle = function(payment, ctx)
    ls.log.info("handled", { entry_id = ctx.id, consumer = ctx.consumer })
    ls.sleep(1000)
  end,
}
