-- What the harness itself promises a spec author.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

describe("luastream.testing", function()
  it("fails the step that ran a failing handler, with the handler's traceback", function()
    local app = testing.app(HERE .. "/failing")
    local ok, err = pcall(app.publish, app, "payments", { id = 1 })
    assert.is_false(ok)
    assert.matches("handler fragile failed on entry %d+%-%d+ %(handler%-error%)", err)
    assert.matches("fragile.lua:6: attempt to index field 'account'", err, 1, true)
    assert.matches("stack traceback:", err, 1, true)
    app:stop()
  end)

  it("records failures instead when asked, and the entry stays pending", function()
    local app = testing.app(HERE .. "/failing", { handler_errors = "record" })
    local id = app:publish("payments", { id = 1 })
    local got = app:received("fragile")
    assert.equal(1, #got)
    assert.equal("error", got[1].outcome)
    assert.equal(id, app:pending("payments", "ledger")[1].id)
    app:stop()
  end)

  it("raises the load problems of a bad handler directory", function()
    local ok, err = pcall(testing.app, HERE .. "/no-such-dir")
    assert.is_false(ok)
    assert.matches("no-such-dir: cannot open handler directory", err, 1, true)
  end)

  it("moves time only when told", function()
    local app = testing.app(HERE .. "/lanes")
    assert.equal(0, app:now())
    app:settle()
    assert.equal(0, app:now())
    app:advance("1.5s")
    assert.equal(1500, app:now())
    app:stop()
  end)

  it("reads durations by the host's one rule: a number is ms, text needs a unit", function()
    local ls = require "luastream"
    assert.equal(30000, ls.duration(30000))
    assert.equal(30000, ls.duration("30s"))
    assert.equal(3600000, ls.duration("1h"))
    assert.equal(1500, ls.duration(" 1.5 s "))
    local ms, why = ls.duration("30000")
    assert.is_nil(ms)
    assert.equal('has no unit: add one, e.g. "30000ms" or "30000s"', why)
    assert.is_nil((ls.duration("30x")))
    assert.is_nil((ls.duration(-1)))
    assert.is_nil((ls.duration("1e400h")))
    assert.has_error(function() ls.backoff { base = "1000" } end)
    local app = testing.app(HERE .. "/lanes")
    app:advance("1h")
    assert.equal(3600000, app:now())
    local ok, err = pcall(app.advance, app, "30")
    assert.is_false(ok)
    assert.matches('a duration has no unit: add one, e.g. "30ms" or "30s"', err, 1, true)
    app:stop()
  end)

  it("never runs an entry twice when a claiming read takes back one still waiting in a lane", function()
    -- ten entries on one lane of 300 ms each: the last ones wait longer than
    -- min_idle (1 s), so the claiming read returns them while they are queued
    local app = testing.app(HERE .. "/slow_claiming")
    for i = 1, 10 do app:publish("s", { n = i }) end
    for _ = 1, 40 do app:advance(100) end
    local seen = {}
    for _, d in ipairs(app:received("slow")) do
      assert.is_nil(seen[d.id], "delivered twice: " .. d.id)
      seen[d.id] = true
    end
    assert.equal(10, #app:received("slow"))
    assert.equal(0, #app:pending("s", "g"))
    app:stop()
  end)
end)
