-- min_idle against --watchdog (host/consumer/min_idle_margin.c): the
-- heartbeat that keeps running entries claimed needs the event loop to
-- turn, and a handler that never yields holds it for up to --watchdog, so
-- `check` and `run` warn (not refuse) when a claiming or reclaim handler's
-- min_idle is below --watchdog plus one heartbeat (min_idle / 3).
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'
local MSG = "min_idle is below --watchdog plus one heartbeat (min_idle / 3): a handler that " ..
  "runs without yielding holds the event loop, and with it the heartbeat that keeps its " ..
  "entries claimed, for up to --watchdog, so another consumer may take an entry that is " ..
  "still running and run it twice"

-- A handler reading payments as its own group.
local function handler(group, fields)
  return string.format([[
return {
  stream = "payments", group = "%s", %s
  handle = function() end,
}
]], group, fields)
end

-- stderr lines of check naming a file with a warning.
local function warnings(stderr)
  local out = {}
  for line in stderr:gmatch("[^\n]+") do
    if line:find(": warning: ", 1, true) then out[#out + 1] = line end
  end
  return out
end

describe("min_idle against --watchdog", function()
  after_each(helper.cleanup)

  it("check warns of each claiming or reclaim handler whose min_idle is below --watchdog plus min_idle / 3, and still passes", function()
    local dir = helper.handlers_dir({
      ["claiming.lua"] = handler("claiming", 'read = "claiming", claim_fallback = true, min_idle = "1s",'),
      ["reclaim.lua"] = handler("reclaim", 'read = "reclaim", min_idle = 14000,'),
      ["enough.lua"] = handler("enough", 'read = "reclaim", min_idle = "15s",'),
      ["new.lua"] = handler("new", ''),
    })
    local code, out, err = helper.luastream("check", dir)
    assert.equal(0, code, out .. err)
    assert.matches("every handler file is valid", out, 1, true)
    local warned = warnings(err)
    assert.equal(2, #warned, err)
    assert.equal(dir .. "/claiming.lua: warning: " .. MSG .. " (min_idle 1000ms, --watchdog 10000ms); " ..
      "if this handler may run that long without yielding (ls.sleep, ls.redis.call and ls.http " ..
      "yield), set min_idle to at least 15000ms or lower --watchdog", warned[1])
    assert.equal(1, select(2, err:gsub("reclaim%.lua: warning: ", "")), err)
    assert.matches("(min_idle 14000ms, --watchdog 10000ms)", err, 1, true)
    -- with the --watchdog run would have: 1s leaves room for 1.5 s
    code, out, err = helper.luastream("check", "--watchdog", "1s", helper.handlers_dir({
      ["claiming.lua"] = handler("claiming", 'read = "claiming", claim_fallback = true, min_idle = 1500,'),
    }))
    assert.equal(0, code, out .. err)
    assert.same({}, warnings(err))
    code, out, err = helper.luastream("check", "--watchdog", "1s", helper.handlers_dir({
      ["claiming.lua"] = handler("claiming", 'read = "claiming", claim_fallback = true, min_idle = 1400,'),
    }))
    assert.equal(0, code, out .. err)
    assert.equal(1, #warnings(err), err)
    assert.matches("at least 1500ms", err, 1, true)
  end)

  it("run warns at start, once per such handler, naming it, min_idle and --watchdog", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({
      ["recover.lua"] = handler("recover", 'read = "reclaim", min_idle = 1000,'),
      ["enough.lua"] = handler("enough", 'read = "reclaim", min_idle = "15s",'),
      ["post.lua"] = handler("post", ''),
    })
    local host = helper.host_start({}, { server = srv, dir = dir })
    host:wait_log(READY, 20, { plain = true })
    local warned = host:records({ msg = MSG })
    assert.equal(1, #warned, host:log())
    assert.equal("warn", warned[1].level)
    assert.equal("recover", warned[1].handler)
    assert.equal(dir .. "/recover.lua", warned[1].file)
    assert.equal("1000", warned[1].min_idle_ms)
    assert.equal("10000", warned[1].watchdog_ms)
    assert.matches("at least 15000ms", warned[1].advice, 1, true)
    assert.equal(0, host:stop())
    -- a --watchdog that leaves room: no warning
    host = helper.host_start({ "--watchdog", "1s", "--load-timeout", "500ms" }, {
      server = srv, dir = helper.handlers_dir({ ["recover.lua"] = handler("recover", 'read = "reclaim", min_idle = 1500,') }),
    })
    host:wait_log(READY, 20, { plain = true })
    assert.equal(0, host:count({ msg = MSG }), host:log())
    assert.equal(0, host:stop())
  end)
end)
