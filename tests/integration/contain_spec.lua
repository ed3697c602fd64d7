-- Handler files are code: what luastream contains when they misbehave.
-- os.exit raises an error instead of ending the process; a file that runs too
-- long at load is a load error (check, start-up, hot reload); a handler that
-- never yields is caught by the watchdog, which logs what ran and exits 70 so
-- a supervisor restarts the host, the entry staying pending.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local RELOAD_FAILED = "handler reload failed, the running version stays"

local function counter(mark)
  return string.format([[
local ls = require "luastream"
return {
  stream = "s", group = "g",
  handle = function(msg)
    ls.log.info("handled", { n = msg.n, mark = %q })
  end,
}
]], mark)
end

-- os.exit at the top level, on line 2.
local EXIT_AT_LOAD = [[
local ls = require "luastream"
os.exit(0)
return { stream = "s", group = "g", handle = function() end }
]]

-- An endless loop at the top level (compiled to a trace if the JIT were on).
local LOOP_AT_LOAD = [[
local n = 0
while true do n = n + 1 end
return { stream = "s", group = "g", handle = function() end }
]]

-- Replaces path whole (write then rename), as editors and deploys do.
local function replace(path, text)
  helper.write_file(path .. ".tmp", text)
  assert(os.rename(path .. ".tmp", path))
end

local function entry(srv, n, stream)
  return srv:cli("XADD", stream or "s", "*", "data", string.format('{"n":%d}', n))
end

-- The stderr line naming file (with a line number).
local function line_naming(text, file)
  local pattern = file:gsub("%p", "%%%0") .. ":%d+:"
  for line in text:gmatch("[^\n]+") do
    if line:find(pattern) then return line end
  end
end

describe("containing handler files", function()
  after_each(helper.cleanup)

  it("check reports os.exit at load as an error of that file", function()
    local dir = helper.handlers_dir({ ["a_good.lua"] = counter("one"), ["quits.lua"] = EXIT_AT_LOAD })
    local code, stdout, stderr = helper.luastream("check", dir, { timeout = 20 })
    assert.equal(1, code, stdout .. stderr)
    local line = line_naming(stderr, dir .. "/quits.lua")
    assert(line, "no quits.lua:LINE: line on stderr:\n" .. stderr)
    assert.truthy(line:find(dir .. "/quits.lua:2:", 1, true), line)
    assert.truthy(line:find("os.exit is not available to handlers", 1, true), line)
    assert.truthy(stderr:find("1 handler file with problems", 1, true), stderr)
  end)

  it("run refuses a file that calls os.exit at load and joins no group", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["a_good.lua"] = counter("one"), ["quits.lua"] = EXIT_AT_LOAD })
    local code, stdout, stderr = helper.luastream("run", "--redis", srv.url, dir, { timeout = 20 })
    assert.equal(1, code, stdout .. stderr)
    assert.truthy(line_naming(stdout .. stderr, dir .. "/quits.lua"), stdout .. stderr)
    assert.equal(0, srv:call("DBSIZE"))
  end)

  it("check stops a file that loops at load at --load-timeout and names it", function()
    local dir = helper.handlers_dir({ ["a_good.lua"] = counter("one"), ["spins.lua"] = LOOP_AT_LOAD })
    local started = helper.now()
    local code, stdout, stderr = helper.luastream("check", "--load-timeout", "300ms", dir, { timeout = 20 })
    local took = helper.now() - started
    assert.equal(1, code, stdout .. stderr)
    local line = line_naming(stderr, dir .. "/spins.lua")
    assert(line, "no spins.lua:LINE: line on stderr:\n" .. stderr)
    assert.truthy(line:find("still running after 300ms", 1, true), line)
    assert.is_falsy(stderr:find("a_good.lua:%d+:"), stderr)
    assert.is_true(took < 10, "check took " .. took .. " s")
  end)

  it("check refuses a bad --load-timeout", function()
    local dir = helper.handlers_dir({ ["a_good.lua"] = counter("one") })
    local code, _, stderr = helper.luastream("check", "--load-timeout", "soon", dir)
    assert.equal(2, code)
    assert.truthy(stderr:find("--load-timeout", 1, true), stderr)
    code = helper.luastream("check", "--load-timeout", "0", dir)
    assert.equal(2, code)
  end)

  it("keeps the running version when a reload calls os.exit or loops at load", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["count.lua"] = counter("one") })
    local host = helper.host_start({ "--load-timeout", "300ms" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })

    replace(dir .. "/count.lua", EXIT_AT_LOAD)
    local failed = host:wait_records({ msg = RELOAD_FAILED }, 1, 10, "the os.exit reload refused")
    assert.truthy(failed[1].error:find(dir .. "/count.lua:2: os.exit is not available to handlers", 1, true),
      failed[1].error)
    entry(srv, 1)
    host:wait_records({ msg = "handled", mark = "one", n = 1 }, 1, 10, "entry 1 on the old version")

    replace(dir .. "/count.lua", LOOP_AT_LOAD)
    failed = host:wait_records({ msg = RELOAD_FAILED }, 2, 10, "the looping reload refused")
    assert.truthy(failed[2].error:find(dir .. "/count.lua", 1, true), failed[2].error)
    assert.truthy(failed[2].error:find("still running after 300ms", 1, true), failed[2].error)
    entry(srv, 2)
    host:wait_records({ msg = "handled", mark = "one", n = 2 }, 1, 10, "entry 2 on the old version")

    assert.is_true(host:alive())
    assert.equal(0, host:stop(10))
    assert.same({}, (srv:pending_ids("s", "g")))
  end)

  it("fails an entry whose handler calls os.exit and keeps running", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["quits.lua"] = [[
return {
  stream = "s", group = "g",
  handle = function(msg)
    if msg.n == 1 then os.exit(0) end
    require("luastream").log.info("handled", { n = msg.n })
  end,
}
]] })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local id = entry(srv, 1)
    local failed = host:wait_records({ msg = "handler failed, entry left pending" }, 1, 10)
    assert.equal(id, failed[1].id)
    assert.truthy(failed[1].error:find("os.exit is not available to handlers", 1, true), failed[1].error)
    entry(srv, 2)
    host:wait_records({ msg = "handled", n = 2 }, 1, 10, "the next entry handled")
    assert.is_true(host:alive())
    assert.same({ id }, (srv:pending_ids("s", "g")))
    assert.equal(0, host:stop(10))
  end)

  it("ends the process when a handler never yields (--watchdog), naming handler and entry", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["spin.lua"] = [[
return {
  stream = "s", group = "g",
  handle = function(msg)
    local n = 0
    while true do n = n + 1 end
  end,
}
]] })
    local host = helper.host_start({ "--watchdog", "1s" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local id = entry(srv, 1)
    local code = host:wait_exit(20)
    assert.equal(70, code)
    local recs = host:records({ msg = "watchdog: the event loop has not turned within the limit, exiting" })
    assert.equal(1, #recs, host:log())
    local r = recs[1]
    assert.equal("error", r.level)
    assert.equal("spin", r.handler)
    assert.equal("s", r.stream)
    assert.equal("g", r.group)
    assert.equal(id, r.id)
    assert.equal(dir .. "/spin.lua", r.file)
    assert.equal("1000ms", r.limit)
    assert.same({ id }, (srv:pending_ids("s", "g")))
  end)

  it("ends a loop of watchdog exits on `new`: the restarted host dead-letters the entry at max_deliveries", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["spin.lua"] = [[
local ls = require "luastream"
return {
  stream = "s", group = "g", read = "new", max_deliveries = 3, dead_letter = "s.dead",
  handle = function(msg, ctx)
    ls.log.info("spinning", { delivery_count = ctx.headers[ls.DELIVERY_COUNT_HEADER] })
    local n = 0
    while true do n = n + 1 end
  end,
}
]] })
    local id
    local counts = {}
    for round = 1, 3 do
      local host = helper.host_start({ "--watchdog", "1s" }, { server = srv, dir = dir })
      host:wait_log(READY, 20, { plain = true })
      if round == 1 then id = entry(srv, 1) end
      assert.equal(70, host:wait_exit(20), "round " .. round)
      local recs = host:records({ msg = "spinning" })
      assert.equal(1, #recs, host:log())
      counts[round] = recs[1].delivery_count or "none"
    end
    assert.same({ "none", "1", "2" }, counts)
    assert.same({ id }, (srv:pending_ids("s", "g")))
    assert.equal(0, srv:xlen("s.dead"))

    -- the 4th host: read a 4th time, set aside without running
    local host = helper.host_start({ "--watchdog", "1s" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    helper.wait_until(function() return srv:xlen("s.dead") == 1, "no dead letter" end, 10, "the dead letter")
    helper.wait_until(function() return #srv:pending_ids("s", "g") == 0, "still pending" end, 10, "nothing pending")
    assert.equal(0, host:count({ msg = "spinning" }))
    local f = srv:xrange("s.dead")[1].fields
    assert.equal("max-deliveries", f["dead-letter-reason"])
    assert.equal(id, f["dead-letter-id"])
    assert.equal("3", f["dead-letter-deliveries"])
    assert.equal(0, host:stop())
  end)

  it("keeps a host whose handlers yield alive under a short --watchdog", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["nap.lua"] = [[
local ls = require "luastream"
return {
  stream = "s", group = "g",
  handle = function(msg)
    ls.sleep(2000) -- longer than the watchdog: waiting is not stalling
    ls.log.info("handled", { n = msg.n })
  end,
}
]] })
    local host = helper.host_start({ "--watchdog", "1s" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    entry(srv, 1)
    host:wait_records({ msg = "handled", n = 1 }, 1, 10)
    -- idle longer than the watchdog too
    pcall(helper.wait_until, function() return false end, 1.5)
    assert.is_true(host:alive())
    assert.equal(0, host:stop(10))
  end)

  it("refuses a bad --watchdog and accepts off", function()
    local dir = helper.handlers_dir({ ["a_good.lua"] = counter("one") })
    local code, _, stderr = helper.luastream("run", "--watchdog", "fast", dir, { timeout = 10 })
    assert.equal(2, code)
    assert.truthy(stderr:find("--watchdog", 1, true), stderr)
  end)

  -- A loop stalled past the consumer leases' time to live would let a second
  -- process take this one's names and run the same entries.
  it("refuses --watchdog off, 0s and above 10s, saying why; accepts 10s", function()
    local dir = helper.handlers_dir({ ["a_good.lua"] = counter("one") })
    for _, limit in ipairs({ "off", "0s" }) do
      local code, _, stderr = helper.luastream("run", "--watchdog", limit, dir, { timeout = 10 })
      assert.equal(2, code, limit)
      assert.truthy(stderr:find("--watchdog cannot be off", 1, true), stderr)
      assert.truthy(stderr:find("time to live (20s)", 1, true), stderr)
      assert.truthy(stderr:find("another process take this process's consumer names", 1, true), stderr)
      assert.truthy(stderr:find("at most 10s", 1, true), stderr)
    end
    for _, limit in ipairs({ "30s", "11s", "10001ms" }) do
      local code, _, stderr = helper.luastream("run", "--watchdog", limit, dir, { timeout = 10 })
      assert.equal(2, code, limit)
      assert.truthy(stderr:find("--watchdog must be at most 10s, got " .. limit, 1, true), stderr)
      assert.truthy(stderr:find("leased for 20s and renewed every 5s", 1, true), stderr)
    end
    -- a reload runs on the loop: its time limit must be below the watchdog's
    local code, _, stderr = helper.luastream("run", "--watchdog", "3s", "--load-timeout", "3s", dir, { timeout = 10 })
    assert.equal(2, code)
    assert.truthy(stderr:find("--load-timeout (3000ms) must be below --watchdog (3000ms)", 1, true), stderr)
    local srv = helper.redis_start()
    local host = helper.host_start({ "--watchdog", "10s" }, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    assert.equal(0, host:stop(10))
  end)

  it("runs with a 10 s watchdog when none is given", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["spin.lua"] = [[
return {
  stream = "s", group = "g",
  handle = function(msg)
    while true do end
  end,
}
]] })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    entry(srv, 1)
    assert.equal(70, host:wait_exit(30))
    local recs = host:records({ msg = "watchdog: the event loop has not turned within the limit, exiting" })
    assert.equal(1, #recs, host:log())
    assert.equal("10000ms", recs[1].limit)
  end)
end)
