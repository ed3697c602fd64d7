-- Pausing a group (docs/operations.md, "Pause and resume") and the breaker
-- (docs/handlers.md, "Pausing on a dependency's outage") on the in-memory
-- broker and its virtual clock: no handler starts more than 1 s after a
-- pause, on any host; what waits goes back uncounted; ls.pause and the
-- breaker rule pause every host once, then one entry probes, and a failed
-- probe pauses again for twice as long, capped.
local ls = require "luastream"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local PAUSED = "subscription paused: no handler starts until it is resumed"
local OPENED = "breaker opened: the group pauses on every host"
local CLOSED = "breaker closed: the probe succeeded, every host resumes"

-- ms since app:now() 0 of a log record's time (all specs here stay within
-- the first hour of the virtual day).
local function at(rec)
  local m, s, ms = rec.time:match("T%d%d:(%d%d):(%d%d)%.(%d%d%d)Z$")
  return (tonumber(m) * 60 + tonumber(s)) * 1000 + tonumber(ms)
end

-- Handler starts: { {n =, at =}, ... } in order.
local function starts(app)
  local out = {}
  for _, r in ipairs(app:records("started")) do out[#out + 1] = { n = tonumber(r.n), at = at(r) } end
  return out
end

local function started_after(app, t)
  local n = 0
  for _, s in ipairs(starts(app)) do
    if s.at > t then n = n + 1 end
  end
  return n
end

local function publish(app, n, msg) apps.publish_n(app, "jobs", n, msg) end

local function step(app, ms)
  for _ = 1, ms / 100 do app:advance(100) end
end

-- Each entry n of 1..count handled exactly once, acked, by the hosts given.
local function each_once(hosts, count)
  local seen = {}
  for _, app in ipairs(hosts) do
    for _, r in ipairs(app:received("jobs")) do
      if r.outcome == "ack" then seen[r.message.n] = (seen[r.message.n] or 0) + 1 end
    end
  end
  for i = 1, count do assert.equal(1, seen[i], "entry " .. i .. " acked once") end
end

-- The delivery counts the entries carry back from a hand-back: none raised.
local function counts_not_raised(hosts)
  for _, app in ipairs(hosts) do
    for _, r in ipairs(app:received("jobs")) do
      local c = r.headers[ls.DELIVERY_COUNT_HEADER]
      assert.is_true(c == nil or c == "0", "entry " .. r.message.n .. " delivered with count " .. tostring(c))
    end
  end
end

describe("luastream pause", function()
  after_each(apps.stop_all)

  it("starts no handler 1 s after it, lets running ones finish, gives back what waits uncounted", function()
    local app = start("pause")
    publish(app, 20, { ms = 300 })
    app:advance(100)
    app:pause_group("jobs", "work", { reason = "deploy" })
    local paused_at = app:now()
    step(app, 5000)
    assert.equal(0, started_after(app, paused_at + 1000))
    assert.equal(#starts(app), #app:received("jobs"), "what ran finished")
    assert.is_true(#starts(app) < 20)
    local recs = app:records(PAUSED)
    assert.equal(1, #recs, "one transition, one line")
    assert.equal("deploy", recs[1].reason)
    assert.equal("until resumed", recs[1].left)
    assert.equal(1, app:metric("luastream_paused", { group = "work" }))
    assert.same({}, app:pending("jobs", "work"), "what waited went back")

    assert.equal(1, app:resume_group("jobs", "work"))
    app:advance("10s")
    each_once({ app }, 20)
    counts_not_raised({ app })
    assert.equal(1, #app:records("subscription resumed"))
    assert.equal(0, app:metric("luastream_paused", { group = "work" }))
    assert.equal(0, app:resume_group("jobs", "work"), "nothing left to resume")
  end)

  it("reaches an idle host within 5 s, riding its lease renewals", function()
    local app = start("pause")
    app:advance("10s")
    local function evals()
      local info = assert(app:command("INFO", "commandstats"))
      return tonumber(info:match("cmdstat_eval:calls=(%d+)")) or 0
    end
    local before = evals()
    app:advance("60s")
    -- 12 renewals and one sweep a minute: the idle look sends nothing of its own
    assert.equal(13, evals() - before)
    app:pause_group("jobs", "work", { reason = "deploy" })
    step(app, 5000)
    assert.equal(1, app:metric("luastream_paused", { group = "work" }))
    assert.equal(1, #app:records(PAUSED))
  end)

  it("gives back what a read already out brings once the pause is seen", function()
    local app = start("pause")
    app:advance("10s") -- idle: a blocking read is out
    app:pause_group("jobs", "work")
    step(app, 5000) -- seen with the lease's renewal
    assert.equal(1, #app:records(PAUSED))
    publish(app, 2) -- the read out brings them
    step(app, 1000)
    assert.equal(0, #starts(app))
    assert.same({}, app:pending("jobs", "work"), "given back, not waiting here")
    app:resume_group("jobs", "work")
    step(app, 2000)
    each_once({ app }, 2)
    counts_not_raised({ app })
  end)

  it("ends by itself after --for", function()
    local app = start("pause")
    app:pause_group("jobs", "work", { ["for"] = "3s" })
    app:advance(1000) -- no host could start anything since, whatever it looked at before
    publish(app, 4)
    step(app, 1900)
    assert.equal(0, #starts(app), "paused for 3 s")
    step(app, 1500)
    assert.equal(4, #starts(app))
    each_once({ app }, 4)
  end)

  it("holds every host of the group, and a host started while it lasts", function()
    local a = start("pause", { hostname = "a" })
    local b = start("pause", { hostname = "b", with = a })
    a:pause_group("jobs", "work")
    a:advance(1000)
    local c = start("pause", { hostname = "c", with = a })
    publish(a, 30)
    step(a, 3000)
    assert.equal(0, #starts(a), "no host starts anything")
    a:resume_group("jobs", "work")
    step(a, 2000)
    each_once({ a, b, c }, 30)
    assert.equal(3, #a:records(PAUSED), "one line per host")
    assert.equal(3, #a:records("subscription resumed"))
  end)
end)

describe("the breaker", function()
  after_each(apps.stop_all)

  it("ls.pause gives the entry back uncounted and pauses every host; one probe resumes them", function()
    local a = start("pause", { hostname = "a" })
    local b = start("pause", { hostname = "b", with = a })
    -- the registry is the process's: count this test's trips
    local trips_before = a:metric("luastream_breaker_trips_total", { group = "work" }) or 0
    a:command("SET", "api:down", "2000")
    publish(a, 6)
    a:settle()
    local opened = a:records(OPENED)
    assert.equal(1, #opened, "one trip, whatever the entries that saw it")
    assert.equal("payments-api 503", opened[1].reason)
    assert.equal("2000ms", opened[1].pause)
    local tripped_at = at(opened[1])
    a:command("DEL", "api:down") -- the dependency is back; the hosts do not know yet
    step(a, 1900)
    assert.equal(0, started_after(a, tripped_at + 1000), "no start while open")
    step(a, 1000)
    local probes = a:records("breaker half-open: this host runs one entry to probe")
    assert.equal(1, #probes, "one host probes")
    assert.equal(1, #a:records(CLOSED))
    step(a, 2000)
    each_once({ a, b }, 6)
    counts_not_raised({ a, b })
    assert.same({}, a:pending("jobs", "work"))
    local trips = a:metric("luastream_breaker_trips_total", { group = "work" }) - trips_before
    assert.equal(1, trips, "one trip counted over both hosts")
  end)

  it("pauses again for twice as long after a failed probe, capped at max_pause", function()
    local app = start("pause")
    app:command("SET", "api:down", "2000")
    publish(app, 10)
    app:settle()
    step(app, 30000)
    local pauses = {}
    for _, r in ipairs(app:records(OPENED)) do pauses[#pauses + 1] = r.pause end
    -- 2 s, then 4, 8, and 8 again (max_pause); each after its probe failed
    assert.same({ "2000ms", "4000ms", "8000ms", "8000ms" }, { unpack(pauses, 1, 4) })
    assert.equal(0, #app:records(CLOSED))
    app:command("DEL", "api:down")
    step(app, 10000)
    assert.equal(1, #app:records(CLOSED))
    each_once({ app }, 10)
    counts_not_raised({ app })
  end)

  it("closes on a partition with entries while another partition has none to probe with", function()
    local app = start("pause_partitioned")
    app:command("SET", "api:down", "1000")
    for i = 1, 3 do app:publish("jobs:{1}", { n = i }) end
    app:settle()
    assert.equal(1, #app:records(OPENED))
    app:command("DEL", "api:down")
    step(app, 40000)
    -- a partition whose probe read finds nothing leaves the probe to the others
    assert.equal(1, #app:records(CLOSED))
    each_once({ app }, 3)
  end)

  it("an operator's pause is not replaced by a trip, and outlasts the breaker", function()
    local app = start("pause")
    app:pause_group("jobs", "work", { reason = "maintenance" })
    app:command("SET", "api:down", "1000")
    app:advance(1000)
    publish(app, 3)
    step(app, 5000)
    assert.equal(0, #starts(app))
    assert.equal("manual", app:command("HGET", "luastream:pause:{jobs}:work", "kind"))
  end)

  it("reports ls.pause without a delay as a bad return naming ls.pause, and pauses nothing", function()
    local app = start("pause", { handler_errors = "record" })
    app:command("SET", "api:down", "soon") -- ls.pause(tonumber("soon")): no delay
    publish(app, 1)
    local got = app:received("jobs")
    assert.equal("error", got[1].outcome)
    assert.equal("bad-return", got[1].reason)
    assert.matches("ls.pause: delay", got[1].error, 1, true)
    assert.equal(0, #app:records(OPENED))
  end)

  it("trips on its rule: 3 failures of one reason within 10 s pause the group", function()
    local app = start("pause_rule", { handler_errors = "record" })
    app:command("SET", "api:down", "1")
    publish(app, 3)
    app:settle()
    local opened = app:records(OPENED)
    assert.equal(1, #opened)
    assert.matches("^3 failures within 10000 ms: .*payments%-api 503$", opened[1].reason)
    assert.equal("2000ms", opened[1].pause)
    -- the failures counted as deliveries (they ran): pending, count 1
    for _, p in ipairs(app:pending("jobs", "work")) do assert.equal(1, p.deliveries) end
  end)
end)
