-- luastream.testing against a real redis-server (opts.redis): the same spec
-- API where a spec needs no clock control.
local testing = require "luastream.testing"
local helper = require "tests.integration.helper"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"
local BEFORE_84 = HERE .. "/../../../handlers/before-8.4"

describe("the harness on a real server", function()
  after_each(helper.cleanup)

  it("runs the handlers, settles on the server's state and refuses to move its clock", function()
    local srv = helper.redis_start()
    local app = testing.app(BEFORE_84, { redis = srv.url })
    local ids = {}
    for i = 1, 20 do
      ids[i] = app:publish("payments", { id = i, account = "acct-" .. (i % 3), amount_cents = i * 100000 },
        { key = "acct-" .. (i % 3) })
    end
    app:settle()
    assert.equal(20, #app:received("post_new_payment"))
    assert.equal(20, #app:received("screen_payment"))
    assert.equal(20, app:xlen("payments.screened"))
    assert.equal(0, #app:pending("payments", "ledger"))
    local replies = app:entries("payments.screened")
    assert.equal(ids[1], replies[1].headers["original-id"])
    assert.has_error(function() app:advance("1s") end,
      "advance needs the in-memory broker: a real server's clock cannot be moved")
    app:stop()
  end)
end)
