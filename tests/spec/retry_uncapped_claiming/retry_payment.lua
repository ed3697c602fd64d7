-- For the delivery cap spec: retries every payment on a claiming read with
-- the cap turned off (max_deliveries = false): Redis counts each claim and
-- nothing ever sets the entry aside.
local ls = require "luastream"

return {
  stream = "payments",
  group = "ledger",
  read = "claiming",
  min_idle = "1s",
  max_deliveries = false,

  handle = function()
    return ls.retry()
  end,
}
