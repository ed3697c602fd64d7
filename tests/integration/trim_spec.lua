-- trim = true under steady load on a real redis-server: the stream stays
-- bounded while every payment is handled once. (That an entry another group
-- has not finished with is kept: tests/spec/trim_spec.lua, and the script
-- against redis-server in the conformance tests.)
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local LEDGER = [[
local ls = require "luastream"
return {
  stream = "payments", group = "ledger", workers = 8, trim = true,
  handle = function(p) ls.redis.call("SADD", "handled", p.id) end,
}
]]

describe("trim = true", function()
  after_each(helper.cleanup)

  it("keeps a stream under steady load bounded, and loses no entry", function()
    local srv = helper.redis_start()
    -- a second group, which moves on as entries arrive (as a consumer that
    -- skips them would): the trim waits for both groups
    srv:cli("XGROUP", "CREATE", "payments", "audit", "$", "MKSTREAM")
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["ledger.lua"] = LEDGER }) })
    host:wait_log(READY, 20, { plain = true })

    local total, peak = 6000, 0
    local t0 = helper.now()
    for round = 1, 30 do -- 200 entries every 200 ms: 1,000 a second for 6 s
      local cmds = {}
      for i = 1, 200 do
        cmds[i] = { "XADD", "payments", "*", "data", string.format('{"id":%d}', (round - 1) * 200 + i) }
      end
      srv:pipe(cmds)
      srv:cli("XGROUP", "SETID", "payments", "audit", "$")
      local len = srv:xlen("payments")
      if len > peak then peak = len end
      local due = t0 + round * 0.2
      while helper.now() < due do helper.wait_until(function() return helper.now() >= due end, 1) end
    end
    helper.wait_until(function() return tonumber(srv:cli("SCARD", "handled")) == total end, 30,
      "every payment handled")
    -- every group finished with every entry: trimmed once the last outcomes are written
    helper.wait_until(function() return srv:xlen("payments") == 0 end, 10, "the stream trimmed")
    assert.is_true(peak < 3000, "the stream grew to " .. peak .. " entries under load")
    assert.equal(0, host:stop())
  end)
end)
