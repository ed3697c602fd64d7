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

  it("keeps an entry whose handler runs ten times min_idle from another host's claiming read", function()
    local a = app({ version = "7.0.15", hostname = "a" })
    local b = app({ with = a, hostname = "b" })
    a:publish("jobs", { n = 1 })
    for _ = 1, 50 do b:advance(100) end
    -- 5 s in: still a's, idle less than a heartbeat, delivered once
    local p = assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10))
    assert.equal(1, #p)
    assert.equal("a-long", p[1][2])
    assert.is_true(p[1][3] <= 400, "idle " .. tostring(p[1][3]) .. " ms")
    assert.equal(1, p[1][4])
    for _ = 1, 70 do b:advance(100) end -- 12 s: the handler's 10 s and then some
    assert.same({ "a-long" }, started(a), "run once, on the host that read it")
    local done = a:received("long")
    assert.equal(1, #done)
    assert.equal("ack", done[1].outcome)
    assert.same({}, a:pending("jobs", "workers"))
  end)
end)
