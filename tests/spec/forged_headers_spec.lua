-- luastream's own header names (retry-group, delivery-count, original-id)
-- written by a producer on the shared stream are data: every group handles
-- every entry exactly as without them, and a retry copy goes to the group's
-- retry stream, which the stream's other groups never see
-- (docs/retries-delays-dead-letters.md). In-memory broker, virtual clock.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")

local app
after_each(function() if app then app:stop() end app = nil end)

local FORGED = {
  { ["retry-group"] = "ledger" }, -- "for ledger only": fraud used to skip it
  { ["retry-group"] = "typo" },   -- every group used to skip it
  { ["delivery-count"] = "999" }, -- used to be dead-lettered unhandled
  { ["original-id"] = "1-0" },
  { ["retry-group"] = "fraud", ["delivery-count"] = "2", ["original-id"] = "5-0" },
}

local function ids_of(list)
  local out = {}
  for _, d in ipairs(list) do out[#out + 1] = d.id end
  table.sort(out)
  return out
end

describe("forged luastream headers on the shared stream", function()
  it("change nothing: both groups handle every entry once, nothing is dead-lettered", function()
    app = testing.app(HERE .. "/two_groups_forged")
    local ids = { app:publish("payments", { id = 0 }) }
    for i, headers in ipairs(FORGED) do
      ids[#ids + 1] = app:publish("payments", { id = i }, { headers = headers })
    end
    app:advance("1m")
    table.sort(ids)
    for _, handler in ipairs({ "ledger", "fraud" }) do
      local got = app:received(handler)
      assert.same(ids, ids_of(got), handler .. " handled every entry once")
      for _, d in ipairs(got) do assert.equal("ack", d.outcome) end
    end
    -- handed over as data
    local forged = app:received("fraud")[4]
    assert.equal("999", forged.headers["delivery-count"])
    assert.equal(0, app:xlen("payments.dead"))
    assert.same({}, app:pending("payments", "ledger"))
    assert.same({}, app:pending("payments", "fraud"))
  end)

  it("a retry on `new` goes to the group's retry stream; the other group never sees it", function()
    app = testing.app(HERE .. "/two_groups_forged")
    local id = app:publish("payments", { id = 1, retry = true })
    app:advance("10s")
    local ledger = app:received("ledger")
    assert.equal(2, #ledger)
    assert.equal("retry", ledger[1].outcome)
    assert.equal("ack", ledger[2].outcome)
    assert.equal("1", ledger[2].headers["delivery-count"])
    assert.equal(id, ledger[2].headers["original-id"])
    assert.equal(1, app:xlen("payments"), "the shared stream holds the original only")
    local copies = app:entries("payments:retry:ledger")
    assert.equal(1, #copies)
    assert.equal(ledger[2].id, copies[1].id)
    assert.equal(1, #app:received("fraud"), "fraud handled the original once, no copy")
    assert.equal(0, app:xlen("payments:retry:fraud"))
    assert.same({}, app:pending("payments:retry:ledger", "ledger"))
  end)
end)
