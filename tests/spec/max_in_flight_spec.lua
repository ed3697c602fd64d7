-- max_in_flight (host/consumer/inflight.c, host/broker/scripts/inflight.lua):
-- the most handlers of a subscription running at once across every host
-- reading the group, on one in-memory broker and the virtual clock.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")

local SLOTS = "luastream:inflight:{jobs}:workers"
local LAPSED = "max_in_flight: slots of running handlers lapsed (the host was paused or cut off " ..
  "past the lease) and were taken by others: more than max_in_flight may run until these finish"

local function num(app, key) return tonumber(app:command("GET", key) or "0") end

-- The "started" list: {consumer, n, at (the server's ms)}.
local function starts(app)
  local out = {}
  for _, s in ipairs(assert(app:command("LRANGE", "started", 0, -1))) do
    local consumer, n, at = s:match("^(%S+) (%S+) (%S+)$")
    out[#out + 1] = { consumer = consumer, n = tonumber(n), at = tonumber(at) }
  end
  return out
end

describe("max_in_flight", function()
  after_each(apps.stop_all)
  local app = apps.start

  it("never runs more than N handlers at once across two hosts, and runs every entry", function()
    local a = app("max_in_flight", { hostname = "a" })
    local b = app("max_in_flight", { with = a, hostname = "b" })
    for n = 1, 24 do a:publish("jobs", { n = n, ms = 300 + (n % 5) * 100 }) end
    local seen = 0
    for _ = 1, 200 do
      b:advance(50)
      local running = num(a, "running")
      assert.is_true(running <= 3, "running " .. running)
      seen = math.max(seen, running)
      if #assert(a:command("LRANGE", "finished", 0, -1)) == 24 then break end
    end
    assert.equal(24, #assert(a:command("LRANGE", "finished", 0, -1)))
    assert.equal(3, num(a, "most"), "the cap, and no more, was reached")
    local by = {}
    for _, s in ipairs(starts(a)) do by[s.consumer] = (by[s.consumer] or 0) + 1 end
    assert.is_true((by["a-capped"] or 0) > 0 and (by["b-capped"] or 0) > 0, "both hosts ran entries")
    b:advance(100)
    assert.equal(0, a:command("ZCARD", SLOTS), "every slot given back")
  end)

  it("shares one cap among the partitions of a partitioned handler", function()
    local a = app("max_in_flight_partitioned", { hostname = "a" })
    for n = 1, 8 do a:publish("jobs", { n = n }, { key = "k" .. n, partitions = 2 }) end
    for _ = 1, 100 do
      a:advance(100)
      assert.is_true(num(a, "running") <= 1)
    end
    assert.equal(8, #assert(a:command("LRANGE", "finished", 0, -1)))
    assert.equal(1, num(a, "most"))
  end)
end)
