-- The heartbeat (host/consumer/heartbeat.c) on the in-memory broker and the
-- virtual clock: a host keeps the entries it holds claimed however long
-- their handlers run.
local testing = require "luastream.testing"

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") .. "/fixtures"

-- Who started the entry, in order (the hosts of one broker share records).
local function started(app)
  local out = {}
  for _, r in ipairs(app:records("started")) do out[#out + 1] = r.consumer end
  return out
end

describe("the heartbeat", function()
  local apps = {}
  after_each(function()
    for _, app in ipairs(apps) do pcall(app.stop, app) end
    apps = {}
  end)

  local function app(opts)
    local a = testing.app(HERE .. "/long_claiming", opts)
    apps[#apps + 1] = a
    return a
  end

  it("keeps the entries whose handlers run ten times min_idle, and those waiting behind them, from another host's claiming read", function()
    local a = app({ version = "7.0.15", hostname = "a" })
    a:publish("jobs", { n = 1 })
    a:publish("jobs", { n = 2 })
    a:publish("jobs", { n = 3 }) -- two lanes: this one waits its turn in a
    local b = app({ with = a, hostname = "b" })
    for _ = 1, 50 do b:advance(100) end
    -- 5 s in: all a's, idle less than a heartbeat, delivered once
    local p = assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10))
    assert.equal(3, #p)
    for _, e in ipairs(p) do
      assert.equal("a-long", e[2])
      assert.is_true(e[3] <= 400, e[1] .. " idle " .. tostring(e[3]) .. " ms")
      assert.equal(1, e[4])
    end
    for _ = 1, 170 do b:advance(100) end -- 22 s: two rounds of 10 s and then some
    assert.same({ "a-long", "a-long", "a-long" }, started(a), "each run once, on the host that read it")
    local done = a:received("long")
    assert.equal(3, #done)
    for _, d in ipairs(done) do assert.equal("ack", d.outcome) end
    assert.same({}, a:pending("jobs", "workers"))
  end)

  it("gives back at a stop the entries read and never started: another host's claiming read takes them at once, their delivery uncounted", function()
    local a = testing.app(HERE .. "/handback_claiming", { version = "7.0.15", hostname = "a" })
    apps[#apps + 1] = a
    for n = 1, 4 do a:publish("jobs", { n = n }) end -- all read by a
    local b = testing.app(HERE .. "/handback_claiming", { with = a, hostname = "b" })
    apps[#apps + 1] = b
    local function who()
      local out = {}
      for _, r in ipairs(a:records("started")) do out[#out + 1] = r.consumer .. ":" .. r.n end
      return out
    end
    assert.same({ "a-queue:1" }, who(), "one lane: 2, 3 and 4 wait in a")
    a:stop() -- 1 is abandoned at the deadline; 2, 3 and 4 were never started
    b:advance(1000) -- about one read of b, far less than min_idle (30 s)
    assert.same({ "a-queue:1", "b-queue:2" }, who(), "b took them at once, one lane: 2 runs")
    local p = assert(b:command("XPENDING", "jobs", "workers", "-", "+", 10))
    local owners = {}
    for _, e in ipairs(p) do owners[#owners + 1] = e[2] .. ":" .. e[4] end
    -- 1 stays a's (abandoned while running: it waits min_idle); 2, 3, 4 are
    -- b's, delivered once in all (a's never-run delivery not counted)
    assert.same({ "a-queue:1", "b-queue:1", "b-queue:1", "b-queue:1" }, owners)
  end)
end)
