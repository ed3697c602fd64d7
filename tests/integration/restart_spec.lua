-- A Redis restart in the middle of a stream of payments: the host reconnects
-- by itself, every payment is screened and answered exactly once, and no
-- entry is left pending. Outcomes written in a transaction that the crash
-- cut off are checked and written again once the server is back.
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'
local TOTAL = 20000

local SCREEN = [[
local ls = require "luastream"
return {
  stream = "payments", group = "fraud", start = "beginning", reply_to = "payments.screened",
  workers = 8,
  handle = function(payment)
    return ls.reply({ payment_id = payment.id, suspicious = payment.amount_cents > 1000000 })
  end,
}
]]

describe("a Redis restart under load", function()
  after_each(helper.cleanup)

  it("loses no payment and answers each exactly once #slow", function()
    local srv = helper.redis_start({ appendonly = true, args = { "--appendfsync", "always" } })
    local host = helper.host_start({}, { server = srv, dir = helper.handlers_dir({ ["screen.lua"] = SCREEN }) })
    host:wait_log(READY, 20, { plain = true })

    srv:pipe(helper.payment_commands(1, TOTAL, 20))
    helper.wait_until(function() return srv:xlen("payments.screened") >= TOTAL / 4 end, 60,
      "a quarter of the payments answered before the crash")
    srv:kill()
    srv:restart()

    helper.wait_until(function()
      local ok, n = pcall(srv.xlen, srv, "payments.screened")
      return ok and n >= TOTAL, tostring(n) .. " answered"
    end, 120, "every payment answered after the restart")
    helper.wait_until(function()
      local ids = srv:pending_ids("payments", "fraud")
      return #ids == 0, #ids .. " pending"
    end, 30, "nothing left pending")
    assert.is_true(host:alive())
    assert.equal(0, host:stop())

    local answered = {}
    for _, reply in ipairs(srv:xrange("payments.screened")) do
      local id = cjson.decode(reply.fields.data).payment_id
      assert.is_nil(answered[id], "payment " .. id .. " answered twice")
      answered[id] = true
    end
    for id = 1, TOTAL do assert(answered[id], "payment " .. id .. " never answered") end
  end)
end)
