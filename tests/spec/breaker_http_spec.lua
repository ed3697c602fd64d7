-- A webhook's Retry-After feeding ls.pause (docs/handlers.md, "Pausing on a
-- dependency's outage"), with ls.http stubbed on the virtual clock: the
-- pause it asks for is capped at the handler's breaker.max_pause (5 minutes
-- without one), and the "breaker opened" line says the pause it got.
local ls = require "luastream"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start

local OPENED = "breaker opened: the group pauses on every host"
local CLOSED = "breaker closed: the probe succeeded, every host resumes"
local HOOK = "https://hooks.test/events"
local AUDIT = "https://audit.test/events"

local function step(app, ms)
  for _ = 1, ms / 200 do app:advance(200) end
end

local function requests_to(app, url)
  local n = 0
  for _, r in ipairs(app:http_requests()) do
    if r.url == url then n = n + 1 end
  end
  return n
end

describe("a Retry-After fed to ls.pause", function()
  after_each(apps.stop_all)

  it("is capped at breaker.max_pause: an hour's Retry-After pauses 2 minutes", function()
    local app = start("pause_http")
    app:http_stub("POST", HOOK, { status = 503, headers = { ["Retry-After"] = "3600" } })
    app:http_stub("POST", AUDIT, { status = 200 })
    app:publish("events", { n = 1 })
    app:settle()
    assert.equal("3600000", app:records("answered")[1].retry_after, "what ls.http read")
    local opened = app:records(OPENED)
    assert.equal(1, #opened)
    assert.equal("120000ms", opened[1].pause)
    assert.equal("webhook 503", opened[1].reason)
    assert.equal(1, app:metric("luastream_paused", { group = "hooks", stream = "events" }))

    app:http_stub("POST", HOOK, { status = 200 }) -- back; the paused group does not know
    step(app, 119000)
    assert.equal(1, requests_to(app, HOOK), "nothing sent while paused")
    step(app, 3000)
    assert.equal(2, requests_to(app, HOOK), "the probe, after 2 minutes")
    assert.equal(1, #app:records(CLOSED))
    local got = app:received("hooks")
    assert.equal("ack", got[#got].outcome)
    assert.equal("0", got[#got].headers[ls.DELIVERY_COUNT_HEADER] or "0", "the pause did not count")
    assert.same({}, app:pending("events", "hooks"))
  end)

  it("is capped at 5 minutes without a breaker field", function()
    local app = start("pause_http")
    app:http_stub("POST", AUDIT, { status = 429, headers = { ["Retry-After"] = "3600" } })
    app:publish("audits", { n = 1 })
    app:settle()
    local opened = app:records(OPENED)
    assert.equal(1, #opened)
    assert.equal("300000ms", opened[1].pause)
    assert.equal("audit 429", opened[1].reason)
  end)
end)
