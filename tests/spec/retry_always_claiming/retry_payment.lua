-- For the retries spec: leaves every payment pending (ls.retry on a claiming
-- read), so Redis counts each claim until max_deliveries sets it aside.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  read = "claiming",
  min_idle = "30s",
  max_deliveries = 3,
  dead_letter = "payments.dead",

  handle = function()
    return ls.retry()
  end,
}
