-- SCRIPT_LAG (host/broker/scripts/lag.lua) on the in-memory server and the
-- virtual clock, where ages are exact: the age of the entry after the
-- group's last-delivered-id and of its smallest pending id, by the server's
-- TIME, as time passes, after XDEL and trimming, with an idle time reset, an
-- id ahead of the clock, and nothing left. The host's metrics and `luastream
-- status` over them are checked on a real server
-- (tests/integration/lag_seconds_spec.lua).
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local DIR = HERE .. "/fixtures/hang_new" -- reads "payments"; the spec uses "orders"
local SCRIPT = assert(io.open(HERE .. "/../../host/broker/scripts/lag.lua")):read("*a")

local function server_ms(app)
  local t = assert(app:command("TIME"))
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- {lag_ms, oldest_pending_ms, next id, smallest pending id} of "orders"/"g"
local function lag(app)
  return assert(app:command("EVAL", SCRIPT, "1", "orders", "g"))[1]
end

describe("SCRIPT_LAG on the virtual clock", function()
  local app
  after_each(function() if app then app:stop() end app = nil end)

  it("ages the next and the oldest pending entry by TIME, after XDEL, trimming and an idle reset", function()
    app = testing.app(DIR)
    local now = server_ms(app)
    local ids = {}
    for i, behind in ipairs { 60000, 50000, 40000, 30000, 20000 } do
      ids[i] = (now - behind) .. "-0"
      app:command("XADD", "orders", ids[i], "f", tostring(i))
    end
    app:command("XGROUP", "CREATE", "orders", "g", "0")
    assert.same({ 60000, 0, ids[1], "" }, lag(app))

    app:command("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "orders", ">")
    assert.same({ 40000, 60000, ids[3], ids[1] }, lag(app))
    app:advance("2500ms")
    assert.same({ 42500, 62500, ids[3], ids[1] }, lag(app))

    -- idle reset to 0: the age stays
    app:command("XCLAIM", "orders", "g", "c", "0", ids[1], "JUSTID")
    assert.same({ 42500, 62500, ids[3], ids[1] }, lag(app))

    app:command("XDEL", "orders", ids[3], ids[1])
    assert.same({ 32500, 62500, ids[4], ids[1] }, lag(app))
    app:command("XTRIM", "orders", "MINID", ids[5])
    assert.same({ 22500, 62500, ids[5], ids[1] }, lag(app))

    app:command("XACK", "orders", "g", ids[1], ids[2])
    app:command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "orders", ">")
    assert.same({ 0, 22500, "", ids[5] }, lag(app))
    app:command("XACK", "orders", "g", ids[5])
    assert.same({ 0, 0, "", "" }, lag(app))

    -- ahead of the clock: 0, never below
    local ahead = (server_ms(app) + 60000) .. "-0"
    app:command("XADD", "orders", ahead, "f", "6")
    assert.same({ 0, 0, ahead, "" }, lag(app))
    app:advance("61s")
    assert.same({ 1000, 0, ahead, "" }, lag(app))
  end)

  it("answers [] for a missing key or group, and per key", function()
    app = testing.app(DIR)
    app:command("XGROUP", "CREATE", "orders", "g", "$", "MKSTREAM")
    assert.same({ {}, { 0, 0, "", "" }, {} },
      assert(app:command("EVAL", SCRIPT, "3", "missing", "orders", "orders:retry:g", "g")))
    assert.same({ {} }, assert(app:command("EVAL", SCRIPT, "1", "orders", "nog")))
  end)
end)
