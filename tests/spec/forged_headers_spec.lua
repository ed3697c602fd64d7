-- luastream's own header names (retry-group, delivery-count, original-id)
-- written by a producer on the shared stream are data: every group handles
-- every entry exactly as without them, and a retry copy goes to the group's
-- retry stream, which the stream's other groups never see
-- (docs/retries-delays-dead-letters.md). In-memory broker, virtual clock.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

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
    -- one copy went through ledger's retry stream (trimmed once acknowledged)
    local info = assert(app:command("XINFO", "STREAM", "payments:retry:ledger"))
    local f = {}
    for i = 1, #info, 2 do f[info[i]] = info[i + 1] end
    assert.equal(1, f["entries-added"])
    assert.equal(ledger[2].id, f["last-generated-id"])
    assert.equal(0, f.length)
    assert.equal(1, #app:received("fraud"), "fraud handled the original once, no copy")
    assert.equal(0, app:xlen("payments:retry:fraud"))
    assert.same({}, app:pending("payments:retry:ledger", "ledger"))
  end)

  it("claiming and reclaim recover entries left pending on the retry stream", function()
    -- claiming: a host dies while its handler runs an entry of the retry
    -- stream; the next host claims it there after min_idle
    local first = testing.app(HERE .. "/hang_forever", { consumer = "host-1" })
    local RETRY = "payments:retry:ledger"
    local id = assert(first:command("XADD", RETRY, "*", "data", '{"id":1}', "delivery-count", "1",
      "original-id", "7-0"))
    first:settle()
    assert.equal("host-1", first:pending(RETRY, "ledger")[1].consumer, "read from the retry stream")
    first:stop()
    app = testing.app(HERE .. "/hang_forever", { consumer = "host-2", with = first })
    app:advance("31s")
    local started
    for _, line in ipairs(app:logs()) do
      if line:find('msg="handler started"', 1, true) and line:find("consumer=host-2", 1, true) then
        started = line
      end
    end
    assert(started, "host-2 never started the entry")
    assert.truthy(started:find("entry_id=" .. id, 1, true))
    -- Redis's count before this claim (1) plus the count the copy carried (1)
    assert.truthy(started:find("delivery_count=2", 1, true), started)
    assert.equal("host-2", app:pending(RETRY, "ledger")[1].consumer)
    app:stop()

    -- reclaim: the `new` handler fails on the copy, reclaim takes it over
    app = testing.app(HERE .. "/delay_on_reclaim", { handler_errors = "record" })
    id = assert(app:command("XADD", RETRY, "*", "data", '{"id":2,"delay":"1m"}',
      "delivery-count", "1", "original-id", "8-0"))
    app:settle()
    assert.equal("error", app:received("post_new_payment")[1].outcome)
    app:advance("31s")
    local reclaimed = app:received("defer_reclaimed_payment")
    assert.equal(1, #reclaimed)
    assert.equal(id, reclaimed[1].id)
    assert.equal("3", reclaimed[1].headers["delivery-count"]) -- Redis's 2 (after the claim) + 1 carried
    assert.equal("ack", reclaimed[1].outcome)
    assert.same({}, app:pending(RETRY, "ledger"))
  end)
end)
