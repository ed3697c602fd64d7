-- What an idle subscription costs the server (docs/operations.md#what-an-idle-host-sends),
-- on the in-memory broker with the virtual clock: with nothing delayed the
-- delay set is swept once a minute, while a delay this host wrote still comes
-- back when due, and one another host wrote (then died) within a minute.
-- Sweeps are counted with INFO commandstats: each runs one XLEN (the retry
-- stream's trim) and nothing else the host sends does.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"
local WALL_START = 1767225600000 -- the virtual wall clock when app:now() is 0
local DELAYED = "payments:delayed:ledger"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

-- calls of each command so far, by lower-case name
local function calls(app)
  local out = {}
  local info = assert(app:command("INFO", "commandstats"))
  for name, n in info:gmatch("cmdstat_([%w|]+):calls=(%d+)") do out[name] = tonumber(n) end
  return out
end

local function sweeps(app) return calls(app).xlen or 0 end

local function id_ms(id) return tonumber(id:match("^(%d+)%-%d+$")) end

describe("an idle subscription", function()
  after_each(apps.stop_all)

  it("sweeps an empty delay set once a minute: 10 sweeps in 10 minutes", function()
    local app = start("delay_on_new", { consumer = "c" })
    local before = sweeps(app)
    assert.is_true(before >= 1, "the sweep at start")
    app:advance("10m")
    assert.equal(10, sweeps(app) - before)
  end)

  it("still gets its own retry_after back when due, with no sweep in between", function()
    local app = start("delay_on_new", { consumer = "c" })
    app:advance("30s") -- in the middle of the minute between two idle sweeps
    local before = sweeps(app)
    local id = app:publish("payments", { id = 1, delay = "10s" })
    assert.equal("retry_after", app:received("defer_payment")[1].outcome)
    app:advance(9999)
    assert.equal(1, #app:received("defer_payment"))
    -- one sweep once the delay was written (it learns when it is due), none until then
    assert.equal(1, sweeps(app) - before)
    app:advance(1)
    local got = app:received("defer_payment")
    assert.equal(2, #got)
    assert.equal(id, got[2].headers["original-id"])
    local at = id_ms(got[2].id) - WALL_START
    assert.is_true(at >= 40000 and at <= 40010, "back on the retry stream at " .. at .. " ms")
    -- and idle again: once a minute
    before = sweeps(app)
    app:advance("5m")
    assert.is_true(sweeps(app) - before <= 6, "sweeps in 5 minutes: " .. (sweeps(app) - before))
  end)

  it("moves a delay another host wrote (and then died) within a minute", function()
    local app = start("delay_on_new", { consumer = "c" })
    app:advance("10s")
    -- the member the other host's transaction wrote: due in 1 s
    local member = "3:1-04:data8:{\"id\":7}14:delivery-count1:111:original-id3:1-0"
    assert.equal(1, app:command("ZADD", DELAYED, tostring(WALL_START + app:now() + 1000), member))
    app:advance("5s")
    assert.same({}, app:received("defer_payment"), "not swept yet: this host sweeps once a minute")
    app:advance("40s")
    assert.same({}, app:received("defer_payment"))
    app:advance("6s") -- the sweep a minute after the one at start
    local got = app:received("defer_payment")
    assert.equal(1, #got)
    assert.equal("1-0", got[1].headers["original-id"])
    assert.equal(0, app:command("ZCARD", DELAYED))
  end)
end)
