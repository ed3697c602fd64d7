-- For the harness spec: one lane, a claiming read with a min_idle shorter
-- than the time entries wait in the lane behind each other.
local ls = require "luastream"

return {
  stream = "s",
  group = "g",
  read = "claiming",
  min_idle = 1000,
  workers = 1,
  batch = 10,
  handle = function()
    ls.sleep(300)
  end,
}
