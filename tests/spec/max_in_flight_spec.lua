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

  it("gives the slots of a host stopped without releasing them to the others within the lease", function()
    local a = app("max_in_flight", { hostname = "a" })
    for n = 1, 3 do a:publish("jobs", { n = n, ms = 60000 }) end
    assert.equal(3, num(a, "running"), "a holds every slot")
    local b = app("max_in_flight", { with = a, hostname = "b" })
    local t = assert(a:command("TIME"))
    local t0 = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    for n = 4, 9 do a:publish("jobs", { n = n, ms = 20000 }) end
    b:advance(1000)
    assert.equal(3, #starts(a), "the others wait while a's slots are held")
    a:stall("30s") -- SIGSTOP: a renews nothing, releases nothing
    local late = {}
    for _, s in ipairs(starts(a)) do
      if s.n > 3 then late[#late + 1] = s end
    end
    assert.is_true(#late >= 1, "entries ran while a was stopped")
    for _, s in ipairs(late) do
      assert.equal("b-capped", s.consumer)
      local after = s.at - t0
      -- a's slots were granted at t0 and not renewed since: their lease ends
      -- INFLIGHT_TTL_MS (20 s) later; b asks every 100 ms
      assert.is_true(after >= 20000 and after <= 20000 + 300, "started " .. after .. " ms after a's grants")
    end
    assert.is_true(#late <= 3)
    -- a resumes: its handlers finish (the documented exception: more than
    -- the cap ran meanwhile), and it says so once
    b:advance(100)
    assert.equal(1, #a:records(LAPSED))
    assert.equal("warn", a:records(LAPSED)[1].level)
  end)

  it("keeps the claim of entries waiting for a slot: they are not deliveries, nor taken by another host", function()
    local a = app("max_in_flight_claiming", { version = "7.0.15", hostname = "a" })
    local b = app("max_in_flight_claiming", { with = a, hostname = "b" })
    local acked = a:metric("luastream_deliveries_total", { handler = "capped_claiming", outcome = "ack" }) or 0
    for n = 1, 8 do a:publish("jobs", { n = n }) end
    for _ = 1, 150 do b:advance(100) end -- 8 x 800 ms one at a time, entries waiting past min_idle (1 s)
    local seen, count = {}, 0
    for _, s in ipairs(assert(a:command("LRANGE", "started", 0, -1))) do
      local n, deliveries = s:match("^%S+ (%S+) (%S+)$")
      assert.is_nil(seen[n], "entry " .. n .. " ran once")
      seen[n] = true
      count = count + 1
      assert.equal("0", deliveries, "entry " .. n .. ": no earlier delivery")
    end
    assert.equal(8, count)
    assert.equal(8, a:metric("luastream_deliveries_total", { handler = "capped_claiming", outcome = "ack" }) - acked)
    assert.same({}, assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10)))
  end)

  it("max_in_flight_per_key: never more than N of one key across two hosts, while other keys go on", function()
    local a = app("max_in_flight_per_key", { hostname = "a" })
    local b = app("max_in_flight_per_key", { with = a, hostname = "b" })
    -- the registry is the process's: other specs' hosts of this handler count too
    local acked = a:metric("luastream_deliveries_total", { handler = "per_key", outcome = "ack" }) or 0
    for n = 1, 8 do a:publish("jobs", { n = n, ms = 1000 }, { key = "hot" }) end
    a:publish("jobs", { n = 100, ms = 1000 }, { key = "cold" })
    a:publish("jobs", { n = 200, ms = 1000 }) -- no key: not limited by it
    b:advance(10)
    local first = {}
    for _, s in ipairs(starts(a)) do first[s.n] = true end
    assert.is_true(first[100], "the other key started at once")
    assert.is_true(first[200], "the entry without a key started at once")
    for _ = 1, 100 do
      b:advance(50)
      assert.is_true(num(a, "running:hot") <= 2, "running " .. num(a, "running:hot"))
      if #assert(a:command("LRANGE", "finished", 0, -1)) == 10 then break end
    end
    assert.equal(10, #assert(a:command("LRANGE", "finished", 0, -1)))
    assert.equal(2, num(a, "most:hot"))
    b:advance(100)
    assert.equal(0, a:command("EXISTS", SLOTS .. ":key:hot", SLOTS .. ":key:cold"), "every key's slots given back")
    assert.equal(10, a:metric("luastream_deliveries_total", { handler = "per_key", outcome = "ack" }) - acked,
      "entries that waited for their key counted once each")
  end)

  it("max_in_flight_per_key: a pause gives back the key slots of the entries it hands back", function()
    local a = app("max_in_flight_per_key", { hostname = "a" })
    for n = 1, 2 do a:publish("jobs", { n = n, ms = 3000 }, { key = "hot" }) end
    for n = 3, 4 do a:publish("jobs", { n = n, ms = 3000 }, { key = "cold" }) end
    -- the 4 lanes are busy: warm's two pass their key's cap and wait on a lane
    for n = 5, 6 do a:publish("jobs", { n = n, ms = 100 }, { key = "warm" }) end
    a:advance(10)
    a:pause_group("jobs", "workers")
    for _ = 1, 40 do a:advance(100) end
    a:resume_group("jobs", "workers")
    for _ = 1, 100 do a:advance(100) end
    assert.equal(6, #assert(a:command("LRANGE", "finished", 0, -1)), "warm ran after the pause")
  end)

  it("max_in_flight_per_key: entries waiting for their key keep their claim and are not deliveries", function()
    local a = app("max_in_flight_per_key_claiming", { version = "7.0.15", hostname = "a" })
    local b = app("max_in_flight_per_key_claiming", { with = a, hostname = "b" })
    for n = 1, 6 do a:publish("jobs", { n = n }, { key = "k" }) end
    for _ = 1, 120 do b:advance(100) end -- 6 x 800 ms one at a time, waiting past min_idle (1 s)
    local seen, count = {}, 0
    for _, s in ipairs(assert(a:command("LRANGE", "started", 0, -1))) do
      local n, deliveries = s:match("^%S+ (%S+) (%S+)$")
      assert.is_nil(seen[n], "entry " .. n .. " ran once")
      seen[n] = true
      count = count + 1
      assert.equal("0", deliveries, "entry " .. n .. ": no earlier delivery")
    end
    assert.equal(6, count)
    assert.same({}, assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10)))
  end)

  it("max_in_flight_per_key: a stopping host hands back the entries waiting for their key", function()
    local a = app("max_in_flight_per_key_claiming", { version = "7.0.15", hostname = "a" })
    for n = 1, 4 do a:publish("jobs", { n = n }, { key = "k" }) end
    local b = app("max_in_flight_per_key_claiming", { with = a, hostname = "b" })
    b:advance(100)
    assert.equal(1, #assert(b:command("LRANGE", "started", 0, -1)), "one runs, three wait for the key")
    a:stop() -- its running handler abandoned (the harness's deadline): its key's slot lapses
    for _ = 1, 250 do b:advance(100) end -- past the lease (20 s)
    local handed = 0
    for _, s in ipairs(assert(b:command("LRANGE", "started", 0, -1))) do
      local consumer, _, deliveries = s:match("^(%S+) (%S+) (%S+)$")
      if consumer == "b-per_key_claiming" and deliveries == "0" then handed = handed + 1 end
    end
    assert.equal(3, handed, "b ran the three a handed back, uncounted")
  end)

  it("max_in_flight, max_in_flight_per_key and rate_per_key together: each holds", function()
    local a = app("max_in_flight_all", { hostname = "a" })
    local b = app("max_in_flight_all", { with = a, hostname = "b" })
    for n = 1, 18 do a:publish("jobs", { n = n }, { key = "k" .. (n % 3) }) end
    for _ = 1, 200 do
      b:advance(50)
      assert.is_true(num(a, "running") <= 2)
      if #assert(a:command("LRANGE", "finished", 0, -1)) == 18 then break end
    end
    assert.equal(18, #assert(a:command("LRANGE", "finished", 0, -1)))
    assert.equal(2, num(a, "most"))
    for k = 0, 2 do assert.equal(1, num(a, "most:k" .. k), "key k" .. k) end
  end)

  it("a stopping host hands back the entries waiting for a slot, uncounted", function()
    local a = app("max_in_flight_claiming", { version = "7.0.15", hostname = "a" })
    for n = 1, 4 do a:publish("jobs", { n = n }) end
    local b = app("max_in_flight_claiming", { with = a, hostname = "b" })
    b:advance(100)
    assert.equal(1, #assert(b:command("LRANGE", "started", 0, -1)), "one runs, three wait on their lanes")
    a:stop() -- its running handler abandoned (the harness's deadline): its slot lapses
    for _ = 1, 250 do b:advance(100) end -- past the lease (20 s)
    local handed = 0
    for _, s in ipairs(assert(b:command("LRANGE", "started", 0, -1))) do
      local consumer, _, deliveries = s:match("^(%S+) (%S+) (%S+)$")
      if consumer == "b-capped_claiming" and deliveries == "0" then handed = handed + 1 end
    end
    assert.equal(3, handed, "b ran the three a handed back, uncounted")
  end)

  it("a paused group starts nothing more, waiting entries go back uncounted, and resumes under the cap", function()
    local a = app("max_in_flight_claiming", { version = "7.0.15", hostname = "a" })
    for n = 1, 4 do a:publish("jobs", { n = n }) end
    a:advance(100)
    assert.equal(1, #assert(a:command("LRANGE", "started", 0, -1)), "one runs, three wait for the slot")
    a:pause_group("jobs", "workers")
    for _ = 1, 50 do a:advance(100) end -- 5 s: the running one ends, its slot comes free
    assert.equal(1, #assert(a:command("LRANGE", "started", 0, -1)), "nothing starts while paused")
    local back = 0
    for _, p in ipairs(assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10))) do
      if tonumber(p[3]) > 1e9 then back = back + 1 end -- idle since the epoch: handed back
    end
    assert.equal(3, back, "the three waiting for the slot were handed back")
    a:resume_group("jobs", "workers")
    for _ = 1, 60 do a:advance(100) end
    local started = assert(a:command("LRANGE", "started", 0, -1))
    assert.equal(4, #started, "every entry ran once after the resume")
    for i = 2, 4 do
      assert.equal("0", started[i]:match("(%S+)$"), "handed back uncounted: " .. started[i])
    end
  end)
end)
