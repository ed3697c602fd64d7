-- trim = true on the paused clock: the stream is trimmed up to what every
-- group reading it has finished with, after outcomes were written, and never
-- past an entry another group holds pending.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures/"
local DIR = HERE .. "trim"

describe("trim = true", function()
  local app
  after_each(function() if app then app:stop() end app = nil end)

  it("trims what every group finished with, and keeps from another group's oldest pending entry", function()
    app = testing.app(DIR, { handler_errors = "record" })
    local ids = {}
    for i = 1, 20 do ids[i] = app:publish("payments", { id = i }) end
    assert.equal(20, #app:received("ledger"))
    assert.equal(20, app:xlen("payments")) -- not before TRIM_MS
    app:advance("999ms")
    assert.equal(20, app:xlen("payments"))
    app:advance("1ms")
    local left = app:entries("payments")
    assert.equal(16, #left)
    assert.equal(ids[5], left[1].id) -- audit still holds 5 pending
    assert.same({ ids[5] }, (function()
      local out = {}
      for _, p in ipairs(app:pending("payments", "audit")) do out[#out + 1] = p.id end
      return out
    end)())
  end)

  it("trims again after the next outcomes, a minute later", function()
    app = testing.app(DIR, { handler_errors = "record" })
    for i = 6, 9 do app:publish("payments", { id = i }) end
    app:advance("2s")
    assert.equal(0, app:xlen("payments"))
    app:advance("1m")
    for i = 10, 12 do app:publish("payments", { id = i }) end
    assert.equal(3, app:xlen("payments"))
    app:advance("1s")
    assert.equal(0, app:xlen("payments"))
  end)

  it("caps the reply, dead-letter and source streams by length, as asked: a loss", function()
    app = testing.app(HERE .. "trim_caps")
    for i = 1, 10 do app:publish("orders", { id = i }) end
    for i = 11, 14 do app:publish("orders", { id = i, reject = true }) end
    local replies = app:entries("orders.replies")
    assert.equal(3, #replies) -- the newest three replies
    assert.equal(10, replies[3].message.id)
    assert.equal(2, app:xlen("orders.dead"))
    assert.equal(14, app:xlen("orders")) -- not before TRIM_MS
    app:advance("1s")
    assert.equal(5, app:xlen("orders"))
  end)

  it("refuses a cap for a stream the handler does not write", function()
    local ok, err = pcall(testing.app, HERE .. "trim_bad")
    assert.is_false(ok)
    assert.matches("reply_max_len.*there is no reply_to", tostring(err))
  end)
end)
