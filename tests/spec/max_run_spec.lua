-- max_run (host/consumer/heartbeat.c): a handler that runs longer than its
-- max_run is logged once and counted, and its entry is no longer kept
-- claimed: another host's claiming read takes it once idle min_idle, while
-- the first handler runs on.

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")

local function started(app)
  local out = {}
  for _, r in ipairs(app:records("started")) do out[#out + 1] = r.consumer .. ":" .. r.n end
  return out
end

local OVERRAN = "handler ran longer than max_run: its entry is no longer kept claimed, and " ..
  "another consumer's claiming or reclaim read may take it once idle min_idle (the handler is " ..
  "not stopped)"

describe("max_run", function()
  after_each(apps.stop_all)
  local app = apps.start -- a host on the handlers of fixtures/NAME

  it("stops keeping the entry of a handler running past it: logged once, counted, taken by another host after min_idle, the handler not stopped", function()
    local a = app("max_run_claiming", { version = "7.0.15", hostname = "a" })
    local id = a:publish("jobs", { n = 1 })
    local b = app("max_run_claiming", { with = a, hostname = "b" })
    local labels = { handler = "runaway", stream = "jobs", group = "workers" }
    assert.equal(0, a:metric("luastream_handler_overran_total", labels), "the series exists at 0")
    for _ = 1, 29 do b:advance(100) end -- 2.9 s: within max_run (3 s)
    assert.same({ "a-runaway:1" }, started(a))
    assert.same({}, a:records(OVERRAN))
    for _ = 1, 10 do b:advance(100) end -- 3.9 s: past max_run, not yet idle min_idle
    local warned = a:records(OVERRAN)
    assert.equal(1, #warned)
    assert.equal("warn", warned[1].level)
    assert.equal("runaway", warned[1].handler)
    assert.equal("jobs", warned[1].stream)
    assert.equal("workers", warned[1].group)
    assert.equal(id, warned[1].id)
    assert.equal("3000", warned[1].max_run_ms)
    local ran = tonumber(warned[1].ran_ms)
    assert.is_true(ran > 3000 and ran <= 3000 + 334, "ran_ms=" .. warned[1].ran_ms .. ": the first beat past it")
    assert.equal(1, a:metric("luastream_handler_overran_total", labels))
    assert.same({ "a-runaway:1" }, started(a), "not taken before it is idle min_idle")
    for _ = 1, 20 do b:advance(100) end -- 5.9 s
    assert.same({ "a-runaway:1", "b-runaway:1" }, started(a), "b's claiming read took it")
    local p = assert(a:command("XPENDING", "jobs", "workers", "-", "+", 10))
    assert.equal("b-runaway", p[1][2])
    assert.equal(1, #a:records(OVERRAN), "logged once")
    assert.equal(1, a:metric("luastream_handler_overran_total", labels), "counted once")
    assert.same({}, a:records("finished"))
    for _ = 1, 150 do b:advance(100) end -- 20.9 s: a's handler ran to its end
    local finished = a:records("finished")
    assert.is_true(#finished >= 1)
    assert.equal("a-runaway", finished[1].consumer, "a's handler ran on")
  end)
end)
