-- The claiming read on a server before 8.4 (claim_fallback, the claim
-- script) with a large batch, on the in-memory broker and the virtual clock:
-- a host takes over the whole backlog a dead consumer left pending.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"
local N = 1500

describe("claim_fallback with a large batch", function()
  local apps = {}
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  it("takes over every idle entry a dead consumer left pending, in one read", function()
    -- The probe only holds the broker: its handler reads another stream.
    local probe = testing.app(HERE .. "/consumers", { version = "7.0.15", hostname = "probe" })
    apps[#apps + 1] = probe
    assert(probe:command("XGROUP", "CREATE", "big", "g", "$", "MKSTREAM"))
    for i = 1, N do assert(probe:command("XADD", "big", "*", "data", '{"n":' .. i .. '}')) end
    local read = assert(probe:command("XREADGROUP", "GROUP", "g", "dead-host", "COUNT", N,
                                      "STREAMS", "big", ">"))
    assert.equal(N, #read[1][2])
    probe:advance("1m")

    local app = testing.app(HERE .. "/take_over_batch", { with = probe })
    apps[#apps + 1] = app
    app:advance("1s")
    local got = app:received("take_over")
    assert.equal(N, #got)
    local seen = {}
    for _, d in ipairs(got) do
      assert.equal("ack", d.outcome)
      assert.equal("1", d.headers["delivery-count"])
      seen[d.message.n] = true
    end
    for i = 1, N do assert.is_true(seen[i], "entry " .. i .. " handled") end
    assert.same({}, app:pending("big", "g"))
    assert.same({}, app:records("read failed, retrying"))
  end)
end)
