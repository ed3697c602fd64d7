-- The harness's log records: stamped with the app's virtual clock, and kept
-- per app (two apps made apart never share their lines).
local testing = require "luastream.testing"

local DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures/consumers"

-- The harness's virtual clock starts at 2026-01-01T00:00:00Z (wall time).
local function stamp(ms)
  return string.format("2026-01-01T00:%02d:%02d.%03dZ", math.floor(ms / 60000),
    math.floor(ms / 1000) % 60, ms % 1000)
end

describe("luastream.testing log records", function()
  it("carry the virtual time of the line, not the machine's", function()
    local app = testing.app(DIR)
    app:advance("90.25s")
    assert.equal(90250, app:now())
    app:publish("payments", { id = 1 })
    local rec = app:records("handled")
    assert.equal(1, #rec)
    assert.equal(stamp(90250), rec[1].time)
    app:advance("30s")
    app:publish("payments", { id = 2 })
    rec = app:records("handled")
    assert.equal(2, #rec)
    assert.equal(stamp(120250), rec[2].time)
    app:stop()
  end)

  it("stay with the app whose host logged them", function()
    local a = testing.app(DIR, { consumer = "host-a" })
    local b = testing.app(DIR, { consumer = "host-b" })
    a:publish("payments", { id = 1 })
    a:publish("payments", { id = 2 })
    b:publish("payments", { id = 3 })
    local function who(app)
      local out = {}
      for _, r in ipairs(app:records("handled")) do out[#out + 1] = r.consumer end
      return out
    end
    assert.same({ "host-a", "host-a" }, who(a))
    assert.same({ "host-b" }, who(b))
    for _, line in ipairs(a:logs()) do assert.not_matches("host%-b", line) end
    for _, line in ipairs(b:logs()) do assert.not_matches("host%-a", line) end
    a:stop()
    b:stop()
  end)
end)
