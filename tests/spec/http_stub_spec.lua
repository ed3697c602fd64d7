-- HTTP stubs in the harness (docs/testing.md, "HTTP stubs"): handlers' ls.http
-- requests answered by the spec's stubs on the virtual clock, recorded in
-- order; slow answers and timeouts in virtual time; a request no stub
-- matches fails its delivery.
local testing = require "luastream.testing"

local SPEC_DIR = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local HERE = SPEC_DIR .. "/fixtures"

local apps = dofile(SPEC_DIR .. "/support/apps.lua")(HERE)
local start = apps.start
local last = apps.last

local CHARGES = "https://provider.test/v1/charges"

describe("HTTP stubs", function()
  after_each(apps.stop_all)

  it("answer a handler's POST, which is recorded with its headers and body", function()
    local app = start("http_stub")
    app:http_stub("POST", CHARGES, { status = 201, headers = { ["X-Request-Id"] = "req-1" },
                                     json = { charged = true } })
    local id = app:publish("payments", { id = 7, amount_cents = 500 })

    local d = app:received("notify")
    assert.equal(1, #d)
    assert.equal("ack", d[1].outcome)
    local rec = last(app, "answered")
    assert.equal("201", rec.status)
    assert.equal('{"charged":true}', rec.body)
    assert.equal("req-1", rec.request_id)

    local reqs = app:http_requests()
    assert.equal(1, #reqs)
    assert.equal("POST", reqs[1].method)
    assert.equal(CHARGES, reqs[1].url)
    assert.equal("payments/notifier/" .. id, reqs[1].headers["idempotency-key"])
    assert.equal("application/json", reqs[1].headers["content-type"])
    assert.equal("0", reqs[1].headers["x-attempt"])
    assert.same({ id = 7, amount_cents = 500 }, require("luastream_testing").json_decode(reqs[1].body))
    assert.same({ id = 7, amount_cents = 500 }, reqs[1].json)
    assert.same({}, app:pending("payments", "notifier"))
  end)

  it("match by method and by a pattern for the whole URL; the newest stub wins", function()
    local app = start("http_stub")
    app:http_stub("*", "https://provider%.test/v1/.*", { status = 500 })
    app:http_stub("GET", CHARGES, { status = 418 })     -- another method: never matches a POST
    app:http_stub("POST", "https://provider%.test/v1/charges", { status = 202 })
    app:http_stub("POST", "https://provider.test/v1", { status = 409 }) -- a prefix is not the URL
    app:publish("payments", { id = 1 })
    app:publish("payments", { id = 2, url = "https://provider.test/v1/refunds" })
    local status = {}
    for _, r in ipairs(app:records("answered")) do status[r.payment_id] = r.status end
    assert.same({ ["1"] = "202", ["2"] = "500" }, status)
  end)

  it("may be a function of the request", function()
    local app = start("http_stub")
    app:http_stub("POST", CHARGES, function(req)
      if req.json.amount_cents > 1000 then return { status = 402, body = "over the limit" } end
      return { status = 200, body = "charged " .. req.json.id .. " for " .. req.headers["idempotency-key"] }
    end)
    local small = app:publish("payments", { id = 1, amount_cents = 500 })
    app:publish("payments", { id = 2, amount_cents = 5000 })
    local recs = app:records("answered")
    assert.equal("200", recs[1].status)
    assert.equal("charged 1 for payments/notifier/" .. small, recs[1].body)
    assert.equal("402", recs[2].status)
    assert.equal("over the limit", recs[2].body)
    assert.same({ "ack", "retry" }, { app:received("notify")[1].outcome, app:received("notify")[2].outcome })
  end)

  it("take virtual time with delay, so a request's timeout passes without waiting", function()
    local app = start("http_stub", { handler_errors = "record" })
    app:http_stub("POST", CHARGES, { status = 200, delay = "2s" })
    app:publish("payments", { id = 1, timeout = "1s" })
    app:advance(900)
    assert.same({}, app:received("notify"))
    assert.same({}, app:records("no response"))
    app:advance(100)
    local d = app:received("notify")
    assert.equal(1, #d)
    assert.equal("error", d[1].outcome)
    local want = "http POST " .. CHARGES .. ": no response within 1000ms"
    assert.equal(want, last(app, "no response").err)
    assert.matches(want, d[1].error, 1, true)
    assert.equal(1000, app:now())
    app:advance("5s") -- the late answer finds nobody waiting
    assert.equal(1, #app:received("notify"))
    assert.equal(1, #app:pending("payments", "notifier"))
  end)

  it("answer slowly within the timeout", function()
    local app = start("http_stub")
    app:http_stub("POST", CHARGES, { delay = "2s" })
    app:publish("payments", { id = 1, timeout = "3s" })
    app:advance("1999ms")
    assert.same({}, app:received("notify"))
    app:advance(1)
    assert.equal("ack", app:received("notify")[1].outcome)
  end)

  it("give a non-2xx status to the handler, which does not raise", function()
    local app = start("http_stub")
    app:http_stub("POST", CHARGES, { status = 503, body = "busy" })
    app:publish("payments", { id = 1 })
    local rec = app:records("answered")[1]
    assert.equal("503", rec.status)
    assert.equal("busy", rec.body)
    assert.equal("retry", app:received("notify")[1].outcome)
  end)

  it("give res.retry_after from a Retry-After in seconds, as ms to wait", function()
    local app = start("http_stub")
    local n = 0
    app:http_stub("POST", CHARGES, function()
      n = n + 1
      if n == 1 then return { status = 429, headers = { ["Retry-After"] = "7" } } end
      return { status = 200 }
    end)
    app:publish("payments", { id = 1 })
    local rec = app:records("answered")[1]
    assert.equal("429", rec.status)
    assert.equal("7000", rec.retry_after)
    assert.equal("retry_after", app:received("notify")[1].outcome)
    app:advance(6999)
    assert.equal(1, #app:http_requests())
    app:advance(1)
    assert.equal(2, #app:http_requests())
    assert.equal("ack", app:received("notify")[2].outcome)
    assert.is_nil(app:records("answered")[2].retry_after) -- no Retry-After: nil
  end)

  it("give res.retry_after from a Retry-After date, measured on the host's (virtual) wall clock", function()
    local app = start("http_stub")
    app:advance("90s")
    -- the harness's wall clock starts at 2026-01-01T00:00:00Z (1767225600 s)
    local date = os.date("!%a, %d %b %Y %H:%M:%S GMT", 1767225600 + app:now() / 1000 + 30)
    assert.equal("Thu, 01 Jan 2026 00:02:00 GMT", date)
    app:http_stub("POST", CHARGES, { status = 503, headers = { ["Retry-After"] = date } })
    app:publish("payments", { id = 1 })
    assert.equal("30000", app:records("answered")[1].retry_after)
    assert.equal("retry_after", app:received("notify")[1].outcome)
  end)

  it("give res.retry_after nil for a malformed Retry-After, and 0 for a date past", function()
    local app = start("http_stub")
    local values = { "soon", "-5", "1.5", "Thu, 01 Jan 2025 00:00:00 GMT" }
    for i, v in ipairs(values) do
      app:http_stub("POST", CHARGES .. "/" .. i, { status = 429, headers = { ["Retry-After"] = v } })
      app:publish("payments", { id = i, url = CHARGES .. "/" .. i })
    end
    local got = {}
    for _, r in ipairs(app:records("answered")) do got[tonumber(r.payment_id)] = r.retry_after or "nil" end
    assert.same({ "nil", "nil", "nil", "0" }, got)
  end)

  it("fail a request with error = a transport failure: nil, err in the handler", function()
    local app = start("http_stub", { handler_errors = "record" })
    app:http_stub("POST", CHARGES, { error = "connection refused" })
    app:publish("payments", { id = 1 })
    assert.equal("http POST " .. CHARGES .. ": connection refused", last(app, "no response").err)
    assert.equal("error", app:received("notify")[1].outcome)
  end)

  it("fail a body over the host's max_body as the real client does", function()
    local app = start("http_stub", { handler_errors = "record" })
    app:http_stub("POST", CHARGES, { body = string.rep("x", 16 * 1024 * 1024 + 1) })
    app:publish("payments", { id = 1 })
    assert.equal("http POST " .. CHARGES .. ": the response body is larger than 16777216 bytes (max_body)",
      last(app, "no response").err)
  end)

  it("are required: a request none matches fails the delivery, naming method and URL", function()
    local app = start("http_stub", { handler_errors = "record" })
    app:http_stub("GET", CHARGES, { status = 200 })
    local id = app:publish("payments", { id = 1 })
    local d = app:received("notify")
    assert.equal(1, #d)
    assert.equal("error", d[1].outcome)
    assert.matches("http POST " .. CHARGES .. ": no stub matches this request (declare one with app:http_stub)",
      d[1].error, 1, true)
    assert.same({}, app:records("no response")) -- raised, not returned
    assert.equal(id, app:pending("payments", "notifier")[1].id)
    assert.equal(1, #app:http_requests()) -- recorded all the same
  end)

  it("raise in the spec's app when a handler error is not recorded", function()
    local app = start("http_stub")
    local ok, err = pcall(app.publish, app, "payments", { id = 1 })
    assert.is_false(ok)
    assert.matches("no stub matches this request", tostring(err), 1, true)
  end)

  it("fail the delivery when a function stub raises or returns a bad response", function()
    local app = start("http_stub", { handler_errors = "record" })
    app:http_stub("POST", CHARGES, function(req)
      if req.json.id == 1 then error("stub broke") end
      return { stauts = 200 }
    end)
    app:publish("payments", { id = 1 })
    app:publish("payments", { id = 2 })
    app:http_stub("*", "https://bad.test/[", { status = 200 })
    app:publish("payments", { id = 3, url = "https://bad.test/x" })
    local d = app:received("notify")
    assert.matches("the stub failed: .*stub broke", d[1].error)
    assert.matches("the stub failed: .*has no field stauts", d[2].error)
    assert.matches("the stub failed: the pattern https://bad.test/[: malformed pattern", d[3].error, 1, true)
  end)

  it("check a table response when it is declared", function()
    local app = start("http_stub")
    assert.has_error(function() app:http_stub("POST", CHARGES, { stauts = 200 }) end)
    assert.has_error(function() app:http_stub("POST", CHARGES, { body = "x", json = {} }) end)
    assert.has_error(function() app:http_stub("POST", CHARGES, { delay = "soon" }) end)
    assert.has_error(function() app:http_stub("POST", CHARGES, 200) end)
  end)

  it("see the same idempotency key on a redelivery and on a retry_after copy", function()
    local app = start("http_stub")
    local n = 0
    app:http_stub("POST", CHARGES, function()
      n = n + 1
      return { status = n < 3 and 503 or 200 }
    end)
    local id = app:publish("payments", { id = 1 })
    assert.equal(2, #app:http_requests()) -- the first answer was a retry: the copy ran at once
    app:advance("10s")                    -- the second was retry_after("5s")
    local reqs = app:http_requests()
    assert.equal(3, #reqs)
    for i, r in ipairs(reqs) do
      assert.equal("payments/notifier/" .. id, r.headers["idempotency-key"])
      assert.equal(tostring(i - 1), r.headers["x-attempt"])
    end
    local d = app:received("notify")
    assert.same({ "retry", "retry_after", "ack" }, { d[1].outcome, d[2].outcome, d[3].outcome })
  end)

  it("answer the requests of 8 lanes at once", function()
    local app = start("http_stub")
    for lane = 1, 8 do
      app:http_stub("POST", "https://provider.test/v1/lane/" .. lane, { status = 200, delay = "1s",
                                                                           body = "lane " .. lane })
    end
    for lane = 1, 8 do
      app:publish("payments", { id = lane, url = "https://provider.test/v1/lane/" .. lane })
    end
    assert.equal(8, #app:http_requests())
    app:advance(999)
    assert.same({}, app:received("notify"))
    app:advance(1)
    local d = app:received("notify")
    assert.equal(8, #d)
    for _, x in ipairs(d) do assert.equal("ack", x.outcome) end
    assert.equal(1000, app:now())
  end)

  it("are shared by a second app on the same broker", function()
    local app = start("http_stub")
    local other = apps.keep(testing.app(HERE .. "/http_stub", { with = app, consumer = "other" }))
    app:http_stub("POST", CHARGES, { status = 200 })
    for i = 1, 4 do app:publish("payments", { id = i }) end
    assert.equal(4, #app:http_requests())
    assert.equal(4, #other:http_requests())
    assert.equal(4, #app:received("notify") + #other:received("notify"))
  end)

  it("let an app stop with a request in flight, its entry left pending", function()
    local app = start("http_stub")
    app:http_stub("POST", CHARGES, { status = 200, delay = "1m" })
    local id = app:publish("payments", { id = 1, timeout = "2m" })
    app:advance("1s")
    assert.equal(id, app:pending("payments", "notifier")[1].id)
    app:stop()
    assert.same({}, app:received("notify")) -- abandoned: no outcome
  end)

  it("refuse to pass requests to real servers from memory", function()
    local app = start("http_stub")
    assert.has_error(function() app:http_passthrough(true) end,
      "http_passthrough needs an app on a real server: testing.app(dir, {redis = URL}) " ..
      "(in memory, every request needs a stub)")
  end)
end)

describe("HTTP stubs on a real server", function()
  local helper = require "tests.integration.helper"
  local registry = require "tests.integration.support.registry"
  after_each(function()
    apps.stop_all()
    helper.cleanup()
  end)

  -- A real HTTP server on a free loopback port (python3's http.server, which
  -- answers a POST 501), or nil when there is no python3. Without the
  -- sanitizers' preload busted runs under: python3 starts ten times slower
  -- with it, past the wait on a busy machine.
  local function http_server()
    if not os.execute("command -v python3 >/dev/null 2>&1") then return nil end
    local port = helper.free_port()
    local proc = helper.spawn({ "python3", "-m", "http.server", "--bind", "127.0.0.1",
                                "--directory", helper.tmpdir("http"), port },
                              { pdeathsig = true, stdout = "/dev/null", stderr = "stdout",
                                env = { LD_PRELOAD = false } })
    registry.procs[#registry.procs + 1] = proc
    helper.wait_until(function() return helper.port_open(port) end, 10, "python3 -m http.server")
    return "http://127.0.0.1:" .. port
  end

  it("pass the requests no stub matches to real servers once asked", function()
    local srv = helper.redis_start()
    local base = http_server()
    if not base then return pending("python3 is not installed") end
    local app = start("http_stub", { redis = srv.url, handler_errors = "record" })
    app:http_stub("POST", CHARGES, { status = 200, delay = "50ms" })
    app:publish("payments", { id = 1, url = base .. "/v1/charges" })
    app:settle()
    assert.matches("http POST " .. base .. "/v1/charges: no stub matches this request",
      app:received("notify")[1].error, 1, true)

    app:http_passthrough(true)
    app:publish("payments", { id = 2, url = base .. "/v1/charges" })
    app:publish("payments", { id = 3 })
    app:settle()
    local status = {}
    for _, r in ipairs(app:records("answered")) do status[r.payment_id] = r.status end
    assert.same({ ["2"] = "501", ["3"] = "200" }, status) -- python's server refuses POST
    local urls = {}
    for _, r in ipairs(app:http_requests()) do urls[r.json.id] = r.url end
    assert.same({ base .. "/v1/charges", base .. "/v1/charges", CHARGES }, urls)

    app:http_passthrough(false)
    app:publish("payments", { id = 4, url = base .. "/v1/charges" })
    app:settle()
    local d = app:received("notify")
    assert.equal("error", d[#d].outcome)
    assert.matches("no stub matches this request", d[#d].error, 1, true)
  end)
end)
