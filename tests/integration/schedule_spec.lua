-- Scheduled handlers against a real redis-server and two real host
-- processes: each tick runs on exactly one of them, a killed host's ticks
-- go on on the other (its lease ends), and `luastream status` shows the
-- schedule's last and next tick. Real time: every = "1s".
local helper = require "tests.integration.helper"
local cjson = require "cjson"

local READY = 'msg="host ready"'

-- Logs each tick with its id and the consumer that ran it, and writes it
-- with the tick's done mark. Each tick runs 500 ms, so a host can be killed
-- while it holds a tick's lease.
local TICKER = [[
local ls = require "luastream"
return {
  every = "1s",
  tick = function(ctx)
    ls.sleep(500)
    ctx:write("RPUSH", "ticks", tostring(ctx.tick))
    ls.log.info("ticked", { tick = ctx.tick, by = ctx.consumer })
  end,
}
]]

-- A schedule whose ticks raise: logged, counted, shown by status.
local BOOM = [[
return { every = "1s", tick = function(ctx) error("no luck at " .. ctx.tick) end }
]]

local function ticks(srv)
  local out = {}
  for _, v in ipairs(srv:call("LRANGE", "ticks", 0, -1)) do out[#out + 1] = tonumber(v) end
  return out
end

-- Every tick in the list once, each a whole second after the one before.
local function assert_each_once(list)
  local seen = {}
  for i, t in ipairs(list) do
    assert.is_nil(seen[t], "tick " .. t .. " written twice")
    seen[t] = true
    assert.equal(0, t % 1000)
    if i > 1 then assert.is_true(t > list[i - 1], "ticks out of order") end
  end
end

describe("scheduled handlers on real hosts", function()
  after_each(helper.cleanup)

  it("run each tick on one of two hosts, go on when one is killed, and show in status #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["ticker.lua"] = TICKER, ["boom.lua"] = BOOM })
    local a = helper.host_start({ "--instance", "1" }, { server = srv, dir = dir })
    local b = helper.host_start({ "--instance", "2" }, { server = srv, dir = dir })
    a:wait_log(READY, 20, { plain = true })
    b:wait_log(READY, 20, { plain = true })
    helper.wait_until(function() return #ticks(srv) >= 4 end, 20, "four ticks")
    -- Each tick was logged by exactly one host.
    local by_tick = {}
    for _, host in ipairs({ a, b }) do
      for _, r in ipairs(host:records({ msg = "ticked" })) do
        assert.is_nil(by_tick[r.tick], "tick " .. r.tick .. " ran on both hosts")
        by_tick[r.tick] = r.by
      end
    end
    assert_each_once(ticks(srv))

    -- Kill host 1 while it runs a tick: host 2 runs that tick once the
    -- 5-second lease ends, and goes on alone, each tick still once.
    local held
    helper.wait_until(function()
      local owner = srv:call("HGET", "luastream:tick:{ticker}", "owner")
      if type(owner) == "string" and owner:find("-ticker-1 ", 1, true) then
        local running = tonumber(srv:call("HGET", "luastream:tick:{ticker}", "running"))
        local now = srv:call("TIME")
        local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
        -- early in its 500 ms: it is still sleeping when the kill lands
        if running and now_ms - running < 250 then held = running end
      end
      return held ~= nil
    end, 20, "host 1 running a tick")
    a.proc:kill("KILL")
    a.proc:wait(10)
    helper.wait_until(function()
      return tonumber(srv:call("HGET", "luastream:tick:{ticker}", "done") or 0) >= held
    end, 20, "the killed host's tick done by the other")
    local list = ticks(srv)
    assert_each_once(list)
    local found = 0
    for _, t in ipairs(list) do if t == held then found = found + 1 end end
    assert.equal(1, found, "the killed host's tick written once")
    local rerun = 0
    for _, r in ipairs(b:records({ msg = "ticked" })) do
      if tonumber(r.tick) == held then rerun = rerun + 1 end
    end
    assert.equal(1, rerun, "host 2 ran the killed host's tick")
    local before = #list
    helper.wait_until(function() return #ticks(srv) >= before + 3 end, 20, "three ticks after the kill")
    list = ticks(srv)
    assert_each_once(list)
    local last = list[#list]
    local newer = 0
    for _, r in ipairs(b:records({ msg = "ticked" })) do
      if tonumber(r.tick) == last then newer = newer + 1 end
    end
    assert.equal(1, newer, "the newest tick ran on the survivor")

    -- status: the schedule, its last tick and its next one.
    local code, out, err = helper.luastream("status", "--redis", srv.url, "--json", dir)
    local ok, doc = pcall(cjson.decode, out)
    assert(ok, "not JSON: " .. out .. err)
    assert.equal(1, code, out .. err) -- boom's last tick raised
    local s, boom
    for _, x in ipairs(doc.schedules) do
      if x.name == "ticker" then s = x end
      if x.name == "boom" then boom = x end
    end
    assert(s and boom, "no schedules in " .. out)
    assert.equal("error", boom.last_outcome)
    assert.truthy(boom.last_error:find("no luck at", 1, true))
    assert.truthy(boom.attention:find("schedule boom: its last tick", 1, true))
    assert.equal(cjson.null, s.attention)
    assert.equal("ticker", s.name)
    assert.equal("luastream:tick:{ticker}", s.key)
    assert.equal("ok", s.last_outcome)
    assert.is_true(s.last_tick_ms >= last)
    assert.is_true(s.next_tick_ms > s.last_tick_ms)
    local _, text = helper.luastream("status", "--redis", srv.url, dir)
    assert.truthy(text:find("SCHEDULE", 1, true), text)
    assert.truthy(text:find("every 1000ms", 1, true), text)
    assert.truthy(text:find("needs attention:\n  schedule boom: its last tick", 1, true), text)
    assert.truthy(#b:records({ msg = "tick failed" }) >= 1)
    assert.equal(0, b:stop())
  end)

  it("luastream check names the file, line and field of a bad scheduled handler", function()
    local dir = helper.handlers_dir({
      ["bad.lua"] = 'return {\n  cron = "*/5 * * *",\n  tz = "Europe/Atlantis",\n  tick = function() end,\n}\n',
      ["both.lua"] = 'return {\n  every = "5m",\n  cron = "* * * * *",\n  tick = function() end,\n}\n',
      ["none.lua"] = 'return {\n  tick = function() end,\n}\n',
      ["notick.lua"] = 'return {\n  every = "5m",\n  stream = "s",\n}\n',
    })
    local code, out, err = helper.luastream("check", dir)
    local text = out .. err
    assert.equal(1, code, text)
    assert.truthy(text:find("bad.lua:2: field 'cron' \"*/5 * * *\": has 4 fields, needs 5", 1, true), text)
    assert.truthy(text:find("bad.lua:3: field 'tz' unknown time zone \"Europe/Atlantis\"", 1, true), text)
    assert.truthy(text:find("both.lua:3: fields 'every' and 'cron': give exactly one", 1, true), text)
    assert.truthy(text:find("none.lua:1: missing required field: 'every' or 'cron'", 1, true), text)
    assert.truthy(text:find("notick.lua:1: missing required field 'tick'", 1, true), text)
    assert.truthy(text:find("notick.lua:3: field 'stream' does not apply to a scheduled handler", 1, true), text)
  end)
end)
