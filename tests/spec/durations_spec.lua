-- ls.duration (lua/luastream.lua) and the outcomes built on it: the host's
-- parser (host/base/duration.c) reached through the harness module, with its
-- reasons as they reach a handler.
local ls = require "luastream"

describe("ls.duration", function()
  it("reads milliseconds and strings with a unit", function()
    assert.same({ 1500, 30000, 250, 300000, 3600000, 1500, 12.7, 0 },
      { ls.duration(1500), ls.duration("30s"), ls.duration("250ms"), ls.duration("5m"),
        ls.duration("1h"), ls.duration("1.5s"), ls.duration(12.7), ls.duration(0) })
  end)

  it("returns nil and why for anything else", function()
    local function why(v) return select(2, ls.duration(v)) end
    assert.is_nil((ls.duration("soon")))
    assert.equal('must be a duration such as "500ms", "30s", "2m" or "1h"', why("soon"))
    assert.equal("must be a non-negative number of milliseconds", why(-1))
    assert.equal('has no unit: add one, e.g. "30ms" or "30s"', why("30"))
    assert.equal('must be a number of milliseconds or a duration such as "30s", got nil', why(nil))
    assert.equal('must be a number of milliseconds or a duration such as "30s", got table', why({}))
    assert.equal("must be at most 2^53 milliseconds", why(2 ^ 60))
  end)
end)

describe("outcomes with a delay", function()
  it("ls.retry_after keeps the delay as given: the host checks it", function()
    assert.same({ retry_after = "30s", outcome = "retry_after" }, ls.retry_after("30s"))
    assert.same({ outcome = "retry_after" }, ls.retry_after(nil))
    assert.same({ retry_after = "soon", outcome = "retry_after" }, ls.retry_after("soon"))
  end)

  it("ls.reject names its reason", function()
    assert.same({ reject = "rejected" }, ls.reject())
    assert.same({ reject = "42" }, ls.reject(42))
  end)

  it("ls.sleep checks its delay before it needs a host", function()
    local ok, err = pcall(ls.sleep, "soon")
    assert.is_false(ok)
    assert.matches('ls.sleep: delay must be a duration such as "500ms"', err, 1, true)
  end)
end)
