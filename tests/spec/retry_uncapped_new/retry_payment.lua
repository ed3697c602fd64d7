-- For the delivery cap spec: retries every payment on a `new` read and sets
-- no max_deliveries, so only the default cap ends the copies.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",

  handle = function()
    return ls.retry()
  end,
}
