-- What a handle may return: one outcome at a time. A table naming two
-- ({ack = true, retry = true}, {reply = ..., reject = ...}) is refused as
-- bad-return, and nothing it asked for is written.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

describe("outcome tables", function()
  it("refuses a table that names two outcomes, as bad-return", function()
    local app = testing.app(HERE .. "/contradictory", { handler_errors = "record" })
    local want = {
      ack_and_retry = "handle returned a table with keys {ack, retry}, which names 2 outcomes " ..
        "(ack, retry); return one: ls.ack(), ls.retry(), ls.retry_after(...), ls.reply(...) or ls.reject(...)",
      reply_and_reject = "which names 2 outcomes (reply, reject)",
      ack_and_retry_after = "which names 2 outcomes (ack, retry_after)",
      retry_after_and_reject = "which names 2 outcomes (reject, retry_after)",
      retry_and_pause = "which names 2 outcomes (retry, pause)",
      reply_with_write = "which names 2 outcomes (ack, reply)",
    }
    local modes = {}
    for mode in pairs(want) do modes[#modes + 1] = mode end
    table.sort(modes)
    for i, mode in ipairs(modes) do
      local id = app:publish("orders", { mode = mode })
      local d = app:received("orders")[i]
      assert.equal("error", d.outcome, mode)
      assert.equal("bad-return", d.reason, mode)
      assert.truthy(d.error:find(want[mode], 1, true), mode .. ": " .. d.error)
      assert.equal(id, app:pending("orders", "g")[i].id, mode)
    end
    assert.equal(0, app:xlen("replies"))
    assert.is_nil(app:command("GET", "written"))
    app:stop()
  end)

  it("takes one outcome as before", function()
    local app = testing.app(HERE .. "/contradictory")
    app:publish("orders", { mode = "ack" })
    app:publish("orders", { mode = "reply" })
    app:publish("orders", { mode = "retry_after" })
    local got = app:received("orders")
    assert.equal("ack", got[1].outcome)
    assert.equal("reply", got[2].outcome)
    assert.equal("retry_after", got[3].outcome)
    assert.equal(1, app:xlen("replies"))
    app:stop()
  end)

  it("logs ls.retry_after as a retry after its delay, not as ls.retry", function()
    local app = testing.app(HERE .. "/contradictory")
    local id = app:publish("orders", { mode = "retry_after" })
    local recs = app:records("entry retried after a delay")
    assert.equal(1, #recs)
    assert.equal(id, recs[1].id)
    assert.equal("1000", tostring(recs[1].delay_ms))
    assert.equal(0, #app:records("entry retried"))
    app:stop()
  end)
end)
