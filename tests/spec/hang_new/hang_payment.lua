-- For the retry trim spec: a `new` subscription with one lane whose handler
-- never comes back, so what it read stays pending and what it has not read
-- yet stays undelivered.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  workers = 1,
  batch = 1,

  handle = function(payment, ctx)
    ls.log.info("handler started", { entry_id = ctx.id })
    ls.sleep("1h")
  end,
}
