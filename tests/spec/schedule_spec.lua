-- Scheduled handlers (`tick` with `every` or `cron`) on the in-process
-- harness: ticks on the virtual clock, in order, once per tick across hosts
-- sharing a broker, catch_up, ctx:write once per tick, a tick that raises,
-- and what a scheduled file may not say.
local testing = require "luastream.testing"
local handler = require "luastream.handler"

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function tempdir()
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir -p '" .. path .. "'"))
  return path
end

-- A scheduled handler that pushes each tick's id onto the list `ticks` (in
-- Redis, so every host of the broker adds to the one list) with ctx:write.
local function ticker(fields, body)
  return string.format([[
local ls = require "luastream"
return {
  %s
  tick = function(ctx)
    %s
    ctx:write("RPUSH", "ticks", tostring(ctx.tick))
  end,
}
]], fields, body or "")
end

-- The ticks written, as numbers.
local function ticks(app)
  local out = {}
  for _, v in ipairs(app:command("LRANGE", "ticks", 0, -1)) do out[#out + 1] = tonumber(v) end
  return out
end

local function grep(app, pattern)
  local out = {}
  for _, line in ipairs(app:logs()) do
    if line:find(pattern) then out[#out + 1] = line end
  end
  return out
end

local FIVE_MIN = 300000

-- SCRIPT_TICK, as the host sends it.
local function tick_script()
  local f = assert(io.open("host/broker/scripts/tick.lua"))
  local text = f:read("*a")
  f:close()
  return text
end

describe("scheduled handlers", function()
  local dir, apps
  before_each(function()
    dir = tempdir()
    apps = {}
  end)
  after_each(function()
    for i = #apps, 1, -1 do apps[i]:stop() end
    os.execute("rm -rf '" .. dir .. "'")
  end)

  local function start(opts)
    local app = testing.app(dir, opts)
    apps[#apps + 1] = app
    return app
  end

  it("runs 12 ticks of a 5 m schedule in an hour, in order, at multiples of 5 m", function()
    write(dir .. "/every5.lua", ticker('every = "5m",'))
    local app = start()
    app:advance("1h")
    local got = ticks(app)
    assert.equal(12, #got)
    for i, t in ipairs(got) do
      assert.equal(0, t % FIVE_MIN, "tick " .. t .. " is not on a multiple of 5 m")
      if i > 1 then assert.equal(FIVE_MIN, t - got[i - 1]) end
    end
    -- Each tick ran no earlier than its time and was done before the next.
    local hash = app:command("HGETALL", "luastream:tick:{every5}")
    local h = {}
    for i = 1, #hash, 2 do h[hash[i]] = hash[i + 1] end
    assert.equal(tostring(got[12]), h.done)
    assert.equal("ok", h.last_outcome)
    assert.equal("12", h.runs)
    assert.equal(tostring(got[12] + FIVE_MIN), h.next)
    assert.equal(12, app:metric("luastream_ticks_total", { handler = "every5", outcome = "ok" }))
    assert.equal((got[12] + FIVE_MIN) / 1000,
      app:metric("luastream_tick_next_run_timestamp_seconds", { handler = "every5" }))
    assert.equal(got[12] / 1000, app:metric("luastream_tick_last_run_timestamp_seconds", { handler = "every5" }))
  end)

  it("gives ctx.tick and ctx.id as the scheduled time in ms, and ctx.name", function()
    write(dir .. "/named.lua", [[
return {
  every = "1m",
  name = "reports",
  tick = function(ctx)
    ctx:write("HSET", "seen", "tick", tostring(ctx.tick), "id", tostring(ctx.id), "name", ctx.name,
      "stream", tostring(ctx.stream))
  end,
}
]])
    local app = start()
    app:advance("1m")
    local tick = tonumber(app:command("HGET", "seen", "tick"))
    assert.equal(0, tick % 60000)
    assert.equal(tostring(tick), app:command("HGET", "seen", "id"))
    assert.equal("reports", app:command("HGET", "seen", "name"))
    assert.equal("nil", app:command("HGET", "seen", "stream"))
    assert.equal(tostring(tick), app:command("HGET", "luastream:tick:{reports}", "done"))
  end)

  it("lets a tick call Redis and HTTP and publish, as handlers do", function()
    write(dir .. "/calls.lua", [[
local ls = require "luastream"
return {
  every = "1m",
  tick = function(ctx)
    local n = ls.redis.call("INCR", "{calls}:count")
    local res = ls.http.get("https://api.example.com/rates")
    ctx:publish("{calls}:out", { n = n, status = res.status, tick = ctx.tick })
  end,
}
]])
    local app = start()
    app:http_stub("GET", "https://api.example.com/rates", { status = 200, body = "{}" })
    app:advance("3m")
    local out = app:entries("{calls}:out")
    assert.equal(3, #out)
    assert.equal(3, out[3].message.n)
    assert.equal(200, out[3].message.status)
    assert.equal(3, #app:http_requests())
  end)

  it("refuses two files of one schedule name", function()
    write(dir .. "/a.lua", ticker('every = "5m", name = "same",'))
    write(dir .. "/b.lua", ticker('every = "1m", name = "same",'))
    local ok, err = pcall(testing.app, dir)
    assert.is_false(ok)
    assert.matches("are both the schedule same", tostring(err))
  end)

  it("runs a cron schedule in its time zone", function()
    write(dir .. "/cron.lua", ticker('cron = "*/15 * * * *", tz = "Europe/Berlin",'))
    local app = start()
    app:advance("1h")
    local got = ticks(app)
    assert.equal(4, #got)
    for i = 2, #got do assert.equal(15 * 60000, got[i] - got[i - 1]) end
  end)

  it("two hosts on one broker run each tick once between them", function()
    write(dir .. "/shared.lua", ticker('every = "5m",'))
    local a = start({ instance = 1 })
    start({ with = a, instance = 2 })
    a:advance("1h")
    local got = ticks(a)
    assert.equal(12, #got)
    for i = 2, #got do assert.equal(FIVE_MIN, got[i] - got[i - 1]) end
  end)

  it("without catch_up runs the newest missed tick once after a pause", function()
    write(dir .. "/every5.lua", ticker('every = "5m",'))
    local app = start()
    app:advance("5m")
    assert.equal(1, #ticks(app))
    app:pause("30m") -- six ticks fall due while the process is stopped
    app:settle()
    local got = ticks(app)
    assert.equal(2, #got)
    assert.equal(6 * FIVE_MIN, got[2] - got[1])
    app:advance("5m")
    assert.equal(3, #ticks(app))
  end)

  it("with catch_up runs each missed tick, in order, after a pause", function()
    write(dir .. "/every5.lua", ticker('every = "5m", catch_up = true,'))
    local app = start()
    app:advance("5m")
    app:pause("30m")
    app:settle()
    local got = ticks(app)
    assert.equal(7, #got)
    for i = 2, #got do assert.equal(FIVE_MIN, got[i] - got[i - 1]) end
  end)

  it("with catch_up runs the newest 100 missed ticks and logs how many it skipped", function()
    write(dir .. "/every5.lua", ticker('every = "5m", catch_up = true,'))
    local app = start()
    app:advance("5m")
    app:pause(130 * FIVE_MIN) -- 130 ticks fall due
    app:settle()
    local got = ticks(app)
    assert.equal(101, #got)
    assert.equal(31 * FIVE_MIN, got[2] - got[1], "the oldest 30 skipped")
    for i = 3, #got do assert.equal(FIVE_MIN, got[i] - got[i - 1]) end
    local rec = app:records("catch_up: older missed ticks skipped")
    assert.equal(1, #rec)
    assert.same({ "30", "100" }, { rec[1].skipped, rec[1].running })
  end)

  it("with catch_up runs the ticks missed while no host ran", function()
    write(dir .. "/every5.lua", ticker('every = "5m", catch_up = true,'))
    local a = start()
    a:advance("10m")
    assert.equal(2, #ticks(a))
    a:stop()
    table.remove(apps)
    -- The same broker, a new host, 20 minutes later: four ticks were missed.
    local b = start({ with = a })
    b:advance("20m")
    local got = ticks(b)
    assert.equal(6, #got)
    for i = 2, #got do assert.equal(FIVE_MIN, got[i] - got[i - 1]) end
  end)

  it("applies a tick's writes once when it runs again after its done mark", function()
    write(dir .. "/every5.lua", ticker('every = "5m",', 'ls.sleep(1000)'))
    local a = start({ instance = 1 })
    local b = start({ with = a, instance = 2 })
    a:advance("5m")
    -- A tick runs on one of them; stall that one past its lease while it sleeps.
    a:advance("1m")
    assert.equal(1, #ticks(a))
    local hash = a:command("HGET", "luastream:tick:{every5}", "runs")
    assert.equal("1", hash)
    -- Forge a second run of the same tick: the done mark refuses its writes.
    local done = a:command("HGET", "luastream:tick:{every5}", "done")
    assert.same({ 0, "", 0 }, a:command("EVAL", tick_script(), 1, "luastream:tick:{every5}", "done", done,
      "someone", "ok", "", "0", "1", "5000", "1", "3", "RPUSH", "ticks", "again"))
    assert.equal(1, #ticks(a))
    -- A tick ahead of the server's clock (a host whose clock runs fast) is not taken yet.
    local early = tonumber(done) + 10 * FIVE_MIN
    local reply = a:command("EVAL", tick_script(), 1, "luastream:tick:{every5}", "take", early, "fast", "5000")
    assert.equal(-2, reply[1])
    assert.is_true(reply[3] > 5000)
    assert.is_not_nil(b)
  end)

  it("runs a tick on the other host once a stalled holder's lease ends", function()
    write(dir .. "/leased.lua", ticker('every = "5m",', 'ls.sleep(2000)'))
    local a = start({ instance = 1 })
    local b = start({ with = a, instance = 2 })
    a:advance("5m") -- due; one host takes it and sleeps
    local holder = a:command("HGET", "luastream:tick:{leased}", "owner")
    assert.is_not_nil(holder)
    local stalled, other = a, b
    if holder:find("instance-2", 1, true) or holder:find("-2 ", 1, true) then stalled, other = b, a end
    stalled:stall("20s") -- past the 5 s lease: the other takes the tick and runs it
    a:settle()
    local got = ticks(a)
    assert.equal(1, #got, "the tick's writes apply once")
    -- It ran on both: the other after the lease ended, the stalled one late.
    assert.equal(1, a:metric("luastream_ticks_total", { handler = "leased", outcome = "ok" }))
    assert.equal(1, a:metric("luastream_ticks_total", { handler = "leased", outcome = "duplicate" }))
    local last_host = a:command("HGET", "luastream:tick:{leased}", "last_host")
    assert.not_equal(holder, last_host)
    assert.is_not_nil(other)
  end)

  it("sends a tick's done mark again when the connection drops before its answer", function()
    write(dir .. "/flaky.lua", ticker('every = "5m",', 'ls.sleep(1000)'))
    local app = start()
    app:advance("5m")
    app:advance(500) -- the tick sleeps
    app:server_down(nil, true)
    app:advance("3s") -- its done mark fails, and is tried again every second
    app:server_down(nil, false)
    app:advance("3s")
    local got = ticks(app)
    assert.equal(1, #got)
    assert.equal(tostring(got[1]), app:command("HGET", "luastream:tick:{flaky}", "done"))
    assert.equal(1, app:metric("luastream_ticks_total", { handler = "flaky", outcome = "ok" }))
    -- written after the outage: 500 ms into the tick, then 3 s down
    local last_at = tonumber(app:command("HGET", "luastream:tick:{flaky}", "last_at"))
    assert.is_true(last_at - got[1] >= 3500, "done mark written at +" .. (last_at - got[1]) .. " ms")
    assert.is_nil(app:metric("luastream_ticks_total", { handler = "flaky", outcome = "unwritten" }))
    app:advance("5m")
    assert.equal(2, #ticks(app))
  end)

  it("counts a done mark applied before its answer was lost once, as ok", function()
    write(dir .. "/lost.lua", ticker('every = "5m",', 'ls.sleep(1000)'))
    local app = start()
    app:slow("EVAL", "2s") -- each script call runs at once, its answer comes 2 s later
    app:advance("5m")
    app:advance("3500ms") -- the take (answered at +2 s), the tick (1 s), the done mark sent
    local done = app:command("HGET", "luastream:tick:{lost}", "done")
    assert.is_not_nil(done, "the done mark ran on the server")
    app:server_down(nil, true) -- its answer is lost with the connection
    app:advance("1s")
    app:server_down(nil, false)
    app:slow()
    app:advance("5s")
    assert.equal(1, #ticks(app))
    assert.equal(1, app:metric("luastream_ticks_total", { handler = "lost", outcome = "ok" }) or 0)
    assert.is_nil(app:metric("luastream_ticks_total", { handler = "lost", outcome = "duplicate" }))
    assert.equal(0, #grep(app, "ran again after it was done"))
    assert.equal(tonumber(done) / 1000,
      app:metric("luastream_tick_last_run_timestamp_seconds", { handler = "lost" }))
  end)

  it("drops a removed schedule's last and next run from /metrics", function()
    write(dir .. "/gone.lua", ticker('every = "5m",'))
    write(dir .. "/kept.lua", ticker('every = "5m",'))
    local app = start()
    app:advance("5m")
    assert.is_not_nil(app:metric("luastream_tick_next_run_timestamp_seconds", { handler = "gone" }))
    assert.is_not_nil(app:metric("luastream_tick_last_run_timestamp_seconds", { handler = "gone" }))
    os.remove(dir .. "/gone.lua")
    app:reload()
    app:advance("5m")
    -- its next run would stay in the past: an alert on it would fire for a schedule no host has
    assert.is_nil(app:metric("luastream_tick_next_run_timestamp_seconds", { handler = "gone" }))
    assert.is_nil(app:metric("luastream_tick_last_run_timestamp_seconds", { handler = "gone" }))
    assert.equal(2, app:metric("luastream_ticks_total", { handler = "kept", outcome = "ok" }))
    assert.equal(app:metric("luastream_tick_last_run_timestamp_seconds", { handler = "kept" }) + 300,
      app:metric("luastream_tick_next_run_timestamp_seconds", { handler = "kept" }))
  end)

  it("logs and counts a tick that raises, marks it done, and runs the next", function()
    write(dir .. "/boom.lua", [[
return {
  every = "5m",
  tick = function(ctx)
    ctx:write("RPUSH", "ticks", tostring(ctx.tick))
    if ctx.tick % 600000 == 0 then error("boom at " .. ctx.tick) end
  end,
}
]])
    local app = start({ handler_errors = "record" })
    app:advance("20m")
    local got = ticks(app)
    assert.equal(2, #got, "the raising ticks' writes are dropped")
    assert.equal(2, app:metric("luastream_ticks_total", { handler = "boom", outcome = "error" }))
    assert.equal(2, app:metric("luastream_ticks_total", { handler = "boom", outcome = "ok" }))
    assert.equal(2, #grep(app, 'msg="tick failed"'))
    assert.truthy(grep(app, 'msg="tick failed"')[1]:find("boom at", 1, true))
    assert.equal("2", app:command("HGET", "luastream:tick:{boom}", "errors"))
  end)

  it("a hot reload changes the schedule", function()
    write(dir .. "/every5.lua", ticker('every = "5m",'))
    local app = start()
    app:advance("10m")
    assert.equal(2, #ticks(app))
    write(dir .. "/every5.lua", ticker('every = "1m",'))
    app:reload()
    app:advance("10m")
    local got = ticks(app)
    assert.equal(12, #got)
    assert.equal(60000, got[12] - got[11])
  end)
end)

describe("scheduled handler fields", function()
  local function problems(t, source)
    local ok, err = pcall(handler.validate, t, "jobs/nightly.lua", source or "")
    assert.is_false(ok)
    return err
  end
  local tick = function() end

  it("accepts every or cron with tick", function()
    local spec = handler.validate({ every = "5m", tick = tick }, "jobs/nightly.lua", "")
    assert.equal(300000, spec.every)
    assert.equal("nightly", spec.name)
    assert.is_false(spec.catch_up)
    spec = handler.validate({ cron = "0 3 * * mon-fri", tz = "Europe/Berlin", tick = tick, name = "n",
      catch_up = true }, "jobs/nightly.lua", "")
    assert.equal("n", spec.name)
  end)

  it("refuses both, neither, a bad cron, an unknown tz, tick missing, stream fields", function()
    assert.matches("fields 'every' and 'cron': give exactly one",
      problems({ every = "5m", cron = "* * * * *", tick = tick }))
    assert.matches("missing required field: 'every' or 'cron'", problems({ tick = tick }))
    local err = problems({ cron = "61 * * * *", tick = tick }, 'return {\n  cron = "61 * * * *",\n}\n')
    assert.matches('jobs/nightly.lua:2: field \'cron\' "61 %* %* %* %*": minute: 61 is out of range 0%-59', err)
    assert.matches("field 'tz' unknown time zone \"Mars/Olympus\"",
      problems({ cron = "* * * * *", tz = "Mars/Olympus", tick = tick }))
    assert.matches("missing required field 'tick'", problems({ every = "5m" }))
    assert.matches("field 'stream' does not apply to a scheduled handler",
      problems({ every = "5m", tick = tick, stream = "s", group = "g" }))
    assert.matches("field 'handle' does not apply to a scheduled handler",
      problems({ every = "5m", handle = tick }))
    assert.matches("field 'tz' applies to cron only", problems({ every = "5m", tz = "UTC", tick = tick }))
    assert.matches("field 'every' must be a whole number of ms of at least 1000",
      problems({ every = "10ms", tick = tick }))
    assert.matches("field 'catch_up' applies to scheduled handlers only",
      problems({ stream = "s", group = "g", handle = tick, catch_up = true }))
    assert.matches("missing required field 'handle'", problems({ stream = "s", group = "g" }))
    assert.matches("field 'name' must not hold '{'", problems({ every = "5m", tick = tick, name = "a{b}" }))
    assert.matches("fields 'handle' and 'tick' set together",
      problems({ stream = "s", group = "g", handle = tick, tick = tick }))
  end)
end)

describe("scheduled handlers with PostgreSQL", function()
  local PG = os.getenv("LUASTREAM_TEST_POSTGRES")
  local server, dir
  local apps = {}
  setup(function()
    if PG and PG ~= "" then return end
    server = require("tests.integration.support.postgres").start()
    PG = server.url
  end)
  teardown(function() if server then server:stop() end end)
  after_each(function()
    for i = #apps, 1, -1 do apps[i]:stop() end
    apps = {}
    if dir then os.execute("rm -rf '" .. dir .. "'") end
  end)

  -- psql without the sanitizer busted may run under (it would hang there)
  local function psql(sql)
    local cmd = "env -u LD_PRELOAD psql -X -q -A -t '" .. PG:gsub("'", "'\\''") .. "' -c \"" .. sql .. "\""
    local f = assert(io.popen(cmd))
    local out = f:read("*a")
    f:close()
    return out
  end

  it("ctx:pg_once runs a tick's transaction once, whichever hosts run the tick", function()
    psql("SET client_min_messages = warning; DROP TABLE IF EXISTS sched_pg_rows, sched_pg_processed;"
      .. " CREATE TABLE sched_pg_rows (tick text, by text)")
    dir = tempdir()
    write(dir .. "/pgtick.lua", [[
local ls = require "luastream"
return {
  every = "5m",
  tick = function(ctx)
    ls.sleep(2000)
    assert(ctx:pg_once(function(tx)
      tx:exec("INSERT INTO sched_pg_rows VALUES ($1, $2)", string.format("%.0f", ctx.tick), ctx.consumer)
    end) ~= nil)
  end,
}
]])
    local a = testing.app(dir, { postgres = PG, pg_once_table = "sched_pg_processed", instance = 1 })
    apps[#apps + 1] = a
    local b = testing.app(dir, { with = a, instance = 2 }) -- a's world: its PostgreSQL too
    apps[#apps + 1] = b
    a:advance("5m")
    local holder = a:command("HGET", "luastream:tick:{pgtick}", "owner")
    local stalled = holder:find("-2 ", 1, true) and b or a
    stalled:stall("20s") -- the other runs the tick after the lease; the stalled one runs it late
    a:settle()
    assert.equal(1, a:metric("luastream_ticks_total", { handler = "pgtick", outcome = "duplicate" }))
    assert.equal("1", (psql("SELECT count(*) FROM sched_pg_rows"):gsub("%s", "")))
  end)
end)
