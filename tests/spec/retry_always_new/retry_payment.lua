-- For the retries spec: retries every payment on a `new` read, so each retry
-- is a copy carrying its delivery count, until max_deliveries sets it aside.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  max_deliveries = 3,
  dead_letter = "payments.dead",

  handle = function()
    return ls.retry()
  end,
}
