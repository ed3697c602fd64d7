-- ls.rate.take (docs/handlers.md, "Rate limits: ls.rate.take") on the
-- in-memory broker and its virtual clock: exactly the permits the rule
-- allows in each second, shared by two hosts of one broker, per key, a
-- timeout, and bad arguments refused with the handler's line.
local testing = require "luastream.testing"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local function permits(app, key)
  local n = 0
  for _, r in ipairs(app:records("permit")) do
    if key == nil or r.key == key then n = n + 1 end
  end
  return n
end

local function publish(app, n, msg) apps.publish_n(app, "calls", n, msg) end

describe("ls.rate.take", function()
  after_each(apps.stop_all)

  it("grants 10 permits in each second for 10/s, spaced evenly", function()
    local app = start("rate")
    publish(app, 50)
    assert.equal(1, permits(app)) -- the burst is one permit: the rule's spacing
    for second = 1, 5 do
      app:advance(999)
      assert.equal(10 * second, permits(app), "by " .. app:now() .. " ms")
      app:advance(1)
      if second < 5 then assert.equal(10 * second + 1, permits(app), "at " .. app:now() .. " ms") end
    end
    assert.equal(50, permits(app))
    assert.equal(50, #app:received("api"))
    assert.same({}, app:pending("calls", "api"))
    -- the limiter's state expires once it is idle again
    assert.is_true(app:command("PTTL", "luastream:limit:{api}") <= 100)
    app:advance(101)
    assert.equal(0, app:command("EXISTS", "luastream:limit:{api}"))
  end)

  it("lets a burst through at once, then the rate", function()
    local app = start("rate")
    publish(app, 30, { spec = "10/s burst 5" })
    assert.equal(5, permits(app))
    app:advance(999)
    assert.equal(14, permits(app)) -- 5 + one each 100 ms
  end)

  it("takes a spec as a table, one limiter per name", function()
    local app = start("rate_wide")
    publish(app, 5, { name = "one", spec = { rate = "10/s", burst = 3 } })
    publish(app, 5, { name = "two", spec = { rate = "1/m" } })
    assert.equal(4, permits(app))
    app:advance(100)
    assert.equal(5, permits(app))
  end)

  it("takes permits in chunks and keeps to the rate under load", function()
    local app = start("rate_wide")
    publish(app, 300, { spec = "200/s" })
    -- a chunk is a 20th of a second's permits (10), the default burst
    assert.equal(10, permits(app))
    app:advance(49) -- a chunk at a time: the next 10 once all 10 are free
    assert.equal(10, permits(app))
    app:advance(1)
    assert.equal(20, permits(app))
    app:advance(949)
    local first = permits(app)
    assert.is_true(first >= 200 and first <= 210, first)
    app:advance(1000)
    assert.equal(300, permits(app))
  end)

  it("shares one limit between two hosts on one broker", function()
    local app = start("rate")
    local other = apps.keep(testing.app(HERE .. "/rate", { with = app, consumer = "other" }))
    publish(app, 40)
    for second = 1, 3 do
      app:advance(999)
      assert.equal(10 * second, permits(app), "by " .. app:now() .. " ms") -- both hosts' lines
      app:advance(1)
    end
    assert.is_true(#app:received("api") > 0)
    assert.is_true(#other:received("api") > 0)
    app:advance("1s")
    assert.equal(40, #app:received("api") + #other:received("api"))
  end)

  it("keeps each key's limit apart", function()
    local app = start("rate_wide")
    publish(app, 15, { key = "a" })
    publish(app, 15, { key = 7 })
    publish(app, 15) -- the limiter without a key
    app:advance(999)
    assert.equal(10, permits(app, "a"))
    assert.equal(10, permits(app, "7"))
    assert.equal(30, permits(app))
    assert.equal(1, app:command("EXISTS", "luastream:limit:{api}:a"))
    assert.equal(1, app:command("EXISTS", "luastream:limit:{api}:7"))
  end)

  -- A limiter named like a stream, keyed like a group (or like a group's key
  -- limiter), beside the group's handler fields: each keeps its own rate.
  local function beside(fixture, key, publish_jobs)
    local field = start(fixture)
    local app = start("rate_wide", { with = field, hostname = "calls" })
    publish_jobs(field)
    publish(app, 20, { name = "jobs", key = key })
    app:advance(999)
    return field, app
  end

  it("shares no state with the rate field of a stream and group named like its name and key", function()
    local field, app = beside("rate_field", "work", function(f) -- jobs/work, rate = "10/s"
      for i = 1, 20 do f:publish("jobs", { n = i }) end
    end)
    assert.equal(10, permits(app, "work")) -- 10/s, burst 1: one each 100 ms
    assert.equal(10, #field:received("jobs"))
    assert.equal(1, app:command("EXISTS", "luastream:limit:{jobs}:work"))
    assert.equal(1, app:command("EXISTS", "luastream:rate:{jobs}:work"))
  end)

  it("shares no state with rate_per_key's limiter of a key named like its key", function()
    local field, app = beside("rate_per_key", "work:key:busy", function(f) -- jobs/work, 5/s per key
      for i = 1, 20 do f:publish("jobs", { n = i }, { key = "busy" }) end
    end)
    assert.equal(10, permits(app, "work:key:busy"))
    assert.equal(5, #field:received("jobs")) -- 5/s, burst 1: one each 200 ms
    assert.equal(1, app:command("EXISTS", "luastream:limit:{jobs}:work:key:busy"))
    assert.equal(1, app:command("EXISTS", "luastream:rate:{jobs}:work:key:busy"))
  end)

  it("gives up at once when no permit can come within the timeout", function()
    local app = start("rate")
    publish(app, 1, { spec = "1/s" })
    publish(app, 1, { spec = "1/s", timeout = "500ms" })
    local no = app:records("no permit")
    assert.equal(1, #no)
    assert.equal("ls.rate.take: api (1 per second): no permit within the timeout (the next in 1000ms)", no[1].why)
    assert.equal(0, app:now())
    publish(app, 1, { spec = "1/s", timeout = "2s" })
    assert.equal(1, permits(app))
    app:advance(999)
    assert.equal(1, permits(app))
    app:advance(1)
    assert.equal(2, permits(app))
    publish(app, 1, { spec = "1/s", timeout = 0 })
    assert.equal(2, #app:records("no permit"))
  end)

  it("refuses a bad spec, name, key or timeout, naming the handler's line", function()
    local app = start("rate", { handler_errors = "record" })
    local cases = {
      { { spec = "200/x" }, 'ls.rate.take: spec "200/x" must be permits per second, minute or hour: ' ..
        '"200/s", "30/m", "1000/h", optionally followed by "burst N"' },
      { { spec = "200" }, 'ls.rate.take: spec "200" must be permits per second' },
      { { spec = "-5/s" }, 'ls.rate.take: spec "-5/s" must be permits per second' },
      { { spec = "0/s" }, 'ls.rate.take: spec "0/s" must be permits per second' },
      { { spec = "10/s burst 0" }, 'ls.rate.take: spec "10/s burst 0": burst must be a whole number >= 1' },
      { { spec = "10/s burst many" }, 'ls.rate.take: spec "10/s burst many": burst must be a whole number >= 1' },
      { { spec = { rate = "10/s", burst = 1.5 } }, "ls.rate.take: spec's burst must be a whole number >= 1, got 1.5" },
      { { spec = { burst = 2 } }, 'ls.rate.take: spec\'s rate must be text such as "200/s"' },
      { { spec = 10 }, 'ls.rate.take: spec must be text such as "200/s" or {rate = "200/s", burst = 400}, got number' },
      { { name = "" }, 'ls.rate.take: name "" must be 1 to 200 printable characters, without { or }' },
      { { name = "a{b}" }, 'ls.rate.take: name "a{b}" must be 1 to 200 printable characters' },
      { { name = string.rep("n", 201) }, 'ls.rate.take: name "' .. string.rep("n", 201) .. '" must be 1 to 200' },
      { { name = 5 }, "ls.rate.take: name must be a string, got number" },
      { { key = "" }, "ls.rate.take: key must be 1 to 1024 bytes long, got 0" },
      { { key = string.rep("k", 1025) }, "ls.rate.take: key must be 1 to 1024 bytes long, got 1025" },
      { { key = true }, "ls.rate.take: key must be a string or a number, got boolean" },
      { { timeout = "2" }, "ls.rate.take: timeout " },
    }
    for i, c in ipairs(cases) do
      publish(app, 1, c[1])
      local d = app:received("api")[i]
      assert.equal("error", d.outcome, c[2])
      assert.matches("api.lua:13: " .. c[2], d.error, 1, true)
    end
    assert.equal(0, permits(app))
  end)
end)
