-- For the numbers spec: replies with the amount it got and its Lua type, so
-- a spec can see what a number turned into on the way in and on the way out.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  reply_to = "payments.echo",
  dead_letter = "payments.dead",

  handle = function(m)
    return ls.reply({ amount = m.amount, kind = type(m.amount) })
  end,
}
