-- app:stall (the harness, host/testing/stall_broker.c and the views of
-- host/memredis/clock_virtual.c): one host stops while another of the same
-- broker runs on. With the heartbeat (host/consumer/heartbeat.c), a
-- claiming read takes an entry whose handler runs ten times min_idle only
-- once its host stalls past min_idle.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")

-- consumer:n of each "started" record, in order (one broker: shared records).
local function started(app)
  local out = {}
  for _, r in ipairs(app:records("started")) do out[#out + 1] = r.consumer .. ":" .. r.n end
  return out
end

describe("a stalled host", function()
  after_each(apps.stop_all)
  local app = apps.start -- a host on the handlers of fixtures/NAME

  it("keeps its entry while its handler runs ten times min_idle, and loses it to another host's claiming read once stalled past min_idle", function()
    local a = app("stall_claiming", { version = "7.0.15", hostname = "a" })
    a:publish("jobs", { n = 1 })
    local b = app("stall_claiming", { with = a, hostname = "b" })
    for _ = 1, 100 do b:advance(100) end -- 10 s: ten times min_idle
    assert.same({ "a-long:1" }, started(a), "b's claiming reads took nothing")
    local p = assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10))
    assert.equal(1, #p)
    assert.equal("a-long", p[1][2])
    assert.is_true(p[1][3] <= 400, "idle " .. tostring(p[1][3]) .. " ms: kept by the heartbeat")
    assert.equal(1, p[1][4], "delivered once")
    a:stall("2s") -- past min_idle: no heartbeat from a
    assert.same({ "a-long:1", "b-long:1" }, started(a), "b took it while a was stalled")
    p = assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10))
    assert.equal("b-long", p[1][2])
    assert.equal(2, p[1][4])
    assert.same({}, a:records("finished"), "a's handler was not stopped, only stalled: still sleeping")
  end)
end)
