-- ls.http against a real local HTTP server (tests/integration/support/http_server.py):
-- JSON POSTs with an idempotency key, a server that never answers, one that
-- closes mid-body, a 100 MB body, 1,000 requests from 64 lanes over reused
-- connections, HTTPS with a test CA, SIGTERM with requests in flight,
-- redirects only when asked, and a proxy from the environment.
local helper = require "tests.integration.helper"
local http_server = require "tests.integration.support.http_server"
local cjson = require "cjson"

local READY = 'msg="host ready"'

-- One handler; what each payment does is its op. URL is the server's.
local HOOK = [[
local ls = require "luastream"
local URL = BASE_URL

local ops = {}

local function echoed_id(body)
  return (body:match('"id":(%d+)'))
end

function ops.post(p, ctx)
  local res, err = ls.http.post(URL .. "/echo" .. (p.query or ""), {
    json = { id = p.id, amount_cents = p.amount_cents },
    headers = { ["Idempotency-Key"] = ctx.idempotency_key },
  })
  if not res then error(err) end
  local echoed = res:json()
  ls.log.info("posted", { payment_id = p.id, status = res.status, key = ctx.idempotency_key,
                          type = res.headers["content-type"], echoed_id = echoed_id(echoed.body) })
end

function ops.get(p)
  local res, err = ls.http.request{ method = p.method or "GET", url = (p.base or URL) .. p.path,
                                    timeout = p.timeout, follow_redirects = p.follow,
                                    headers = p.headers }
  local fill = res and res.headers["x-fill"]
  ls.log.info("got", { payment_id = p.id, status = res and res.status, len = res and #res.body,
                       err = err, fill = fill and #fill, retry_after = res and res.retry_after })
  if not res then error(err) end
end

return {
  stream = "payments", group = "hooks", start = "beginning", workers = 64,
  handle = function(p, ctx) ops[p.op](p, ctx) end,
}
]]

local function hook_dir(base_url)
  return helper.handlers_dir({ ["hook.lua"] = HOOK:gsub("BASE_URL", string.format("%q", base_url)) })
end

local function publish(srv, t)
  return assert(srv:call("XADD", "payments", "*", "data", cjson.encode(t)))
end

local function start(web, args, opts)
  opts = opts or {}
  local srv = opts.server or helper.redis_start()
  local host = helper.host_start(args or {}, { server = srv, dir = hook_dir(opts.url or web.url),
                                               env = opts.env })
  host:wait_log(READY, 20, { plain = true })
  return srv, host
end

describe("ls.http on a real HTTP server", function()
  after_each(helper.cleanup)

  it("POSTs JSON with the entry's idempotency key and reads the JSON answer", function()
    local web = http_server.start()
    local srv, host = start(web)
    local ids = {}
    for i = 1, 20 do ids[i] = publish(srv, { op = "post", id = i, amount_cents = 100 * i }) end
    local recs = host:wait_records({ msg = "posted" }, 20, 20, "20 payments posted")
    for _, r in ipairs(recs) do
      assert.equal("200", r.status)
      assert.equal("application/json", r.type)
      assert.equal(r.payment_id, r.echoed_id)
    end
    local seen = {}
    for _, req in ipairs(web:requests()) do
      assert.equal("POST", req.method)
      assert.equal("application/json", req.headers["content-type"])
      assert.is_nil(req.headers["expect"])
      local body = cjson.decode(req.body)
      assert.equal(100 * body.id, body.amount_cents)
      seen[body.id] = req.headers["idempotency-key"]
    end
    for i = 1, 20 do assert.equal("payments/hooks/" .. ids[i], seen[i]) end
    helper.wait_until(function() return #srv:pending_ids("payments", "hooks") == 0 end, 10, "all acked")
  end)

  it("times out on a server that never answers; the entry stays pending and the host carries on", function()
    local web = http_server.start()
    local srv, host = start(web)
    local id = publish(srv, { op = "get", id = 1, path = "/never", timeout = "300ms" })
    local rec = host:wait_records({ msg = "got" }, 1, 20, "the request to /never")[1]
    assert.equal("http GET " .. web.url .. "/never: no response within 300ms", rec.err)
    helper.wait_until(function() return host:count({ level = "error" }) >= 1 end, 10, "the handler error")
    assert.same({ id }, srv:pending_ids("payments", "hooks"))
    publish(srv, { op = "get", id = 2, path = "/status/503" })
    local ok = host:wait_records({ msg = "got", payment_id = "2" }, 1, 20, "a request after the timeout")[1]
    assert.equal("503", ok.status) -- a 5xx is a response, not an error
    assert.is_true(host:alive())
  end)

  it("fails a request whose server closes mid-body, and caps a 100 MB body", function()
    local web = http_server.start()
    local srv, host = start(web, { "--http-max-body", "1048576" })
    publish(srv, { op = "get", id = 1, path = "/close-mid-body" })
    publish(srv, { op = "get", id = 2, path = "/big?bytes=100000000" })
    publish(srv, { op = "get", id = 3, path = "/big?bytes=100000000&chunked=1" })
    publish(srv, { op = "get", id = 4, path = "/big?bytes=1048576&chunked=1" })
    host:wait_records({ msg = "got" }, 4, 30, "four requests")
    local mid = host:records({ msg = "got", payment_id = "1" })[1]
    assert.matches("^http GET " .. web.url:gsub("%p", "%%%0") .. "/close%-mid%-body: ", mid.err)
    for _, n in ipairs { "2", "3" } do
      assert.matches("the response body is larger than 1048576 bytes %(max_body%)$",
        host:records({ msg = "got", payment_id = n })[1].err)
    end
    assert.equal("1048576", host:records({ msg = "got", payment_id = "4" })[1].len)
    assert.is_true(host:alive())
  end)

  it("runs 1,000 requests from 64 lanes over at most --http-per-host connections", function()
    local web = http_server.start()
    local srv, host = start(web, { "--http-per-host", "8" })
    local cmds = {}
    for i = 1, 1000 do
      -- the first requests wait at the server until two are in flight at
      -- once (10 s at most): lanes that run requests side by side get there
      -- at once, one request at a time never does
      cmds[i] = { "XADD", "payments", "*", "data",
                  cjson.encode({ op = "post", id = i, amount_cents = i, query = "?together=2" }) }
    end
    srv:pipe(cmds)
    host:wait_records({ msg = "posted" }, 1000, 60, "1,000 payments posted")
    local stats = web:stats()
    assert.equal(1000, stats.requests)
    assert.is_true(stats.connections <= 8, "connections: " .. stats.connections)
    assert.is_true(stats.max_concurrent <= 8, "max_concurrent: " .. stats.max_concurrent)
    assert.is_true(stats.max_concurrent >= 2, "requests ran one at a time")
    helper.wait_until(function() return #srv:pending_ids("payments", "hooks") == 0 end, 20, "all acked")
  end)

  it("speaks HTTPS to a server whose CA it is given, and refuses one it cannot check", function()
    local web = http_server.start({ tls = true })
    local srv = helper.redis_start()
    local _, trusting = start(web, { "--http-ca-file", web.ca_file }, { server = srv })
    publish(srv, { op = "get", id = 1, path = "/status/200" })
    assert.equal("200", trusting:wait_records({ msg = "got" }, 1, 20, "the HTTPS request")[1].status)
    trusting:stop()

    local srv2 = helper.redis_start()
    local _, doubting = start(web, {}, { server = srv2 })
    publish(srv2, { op = "get", id = 2, path = "/status/200" })
    local rec = doubting:wait_records({ msg = "got" }, 1, 20, "the refused HTTPS request")[1]
    assert.matches("certificate", rec.err)
  end)

  it("waits for requests in flight on SIGTERM, and abandons them at the shutdown deadline", function()
    local web = http_server.start()
    local srv, host = start(web)
    for i = 1, 4 do publish(srv, { op = "get", id = i, path = "/slow?ms=1500" }) end
    helper.wait_until(function() return web:stats().in_flight == 4 end, 10, "4 requests in flight")
    host:signal("TERM")
    assert.equal(0, host:wait_exit(20))
    assert.equal(4, #host:records({ msg = "got", status = "200" }))
    assert.same({}, srv:pending_ids("payments", "hooks"))

    local srv2 = helper.redis_start()
    local _, stuck = start(web, { "--shutdown-timeout", "500ms" }, { server = srv2 })
    local held = {}
    for i = 1, 3 do held[i] = publish(srv2, { op = "get", id = i, path = "/never", timeout = "60s" }) end
    helper.wait_until(function() return web:stats().in_flight >= 3 end, 10, "3 requests held")
    stuck:signal("TERM")
    -- the requests are held for 60 s: an exit within 30 s is the 500 ms
    -- deadline's (a bound that holds on a busy machine, unlike "within 5 s")
    stuck:wait_exit(30)
    assert.equal(0, stuck:count({ msg = "got" }))
    -- abandoned: given back through the group's retry stream, counted
    assert.same({}, srv2:pending_ids("payments", "hooks"))
    table.sort(held)
    local copies = {}
    for _, c in ipairs(srv2:xrange("payments:retry:hooks")) do
      copies[#copies + 1] = c.fields["original-id"]
      assert.equal("1", c.fields["delivery-count"])
    end
    table.sort(copies)
    assert.same(held, copies)
  end)

  it("follows a redirect only when the request asks", function()
    local web = http_server.start()
    local srv, host = start(web)
    publish(srv, { op = "get", id = 1, path = "/status/302" })
    publish(srv, { op = "get", id = 2, path = "/status/302", follow = true })
    host:wait_records({ msg = "got" }, 2, 20, "two requests")
    assert.equal("302", host:records({ msg = "got", payment_id = "1" })[1].status)
    assert.equal("200", host:records({ msg = "got", payment_id = "2" })[1].status)
    assert.equal(3, web:stats().requests)
  end)

  it("reads Retry-After as ms to wait: seconds, a date on the real clock, nil when two disagree", function()
    local web = http_server.start()
    local srv, host = start(web)
    local function q(v) return (v:gsub("[^%w]", function(c) return string.format("%%%02X", c:byte()) end)) end
    local in_an_hour = os.date("!%a, %d %b %Y %H:%M:%S GMT", os.time() + 3600)
    publish(srv, { op = "get", id = 1, path = "/status/429?retry_after=7" })
    publish(srv, { op = "get", id = 2, path = "/status/503?retry_after=" .. q(in_an_hour) })
    publish(srv, { op = "get", id = 3, path = "/status/429?retry_after=5&retry_after=6" })
    publish(srv, { op = "get", id = 4, path = "/status/429?retry_after=7&retry_after=7" })
    host:wait_records({ msg = "got" }, 4, 20, "four requests")
    local function got(id) return host:records({ msg = "got", payment_id = id })[1] end
    assert.equal("429", got("1").status)
    assert.equal("7000", got("1").retry_after)
    local hour = tonumber(got("2").retry_after)
    assert.is_true(hour > 3600000 - 10000 and hour <= 3600000, "an hour ahead: " .. tostring(hour))
    assert.is_nil(got("3").retry_after)
    assert.equal("7000", got("4").retry_after)
  end)

  it("sends HEAD and empty header values as asked; caps the response headers", function()
    local web = http_server.start()
    local srv, host = start(web)
    publish(srv, { op = "get", id = 1, method = "HEAD", path = "/big?bytes=5000000" })
    publish(srv, { op = "get", id = 2, method = "POST", path = "/echo", headers = { ["X-Empty"] = "" } })
    publish(srv, { op = "get", id = 3, path = "/headers?lines=2" })
    publish(srv, { op = "get", id = 4, path = "/headers?lines=3000" })
    host:wait_records({ msg = "got" }, 4, 20, "four requests")
    local head = host:records({ msg = "got", payment_id = "1" })[1]
    assert.equal("200", head.status)
    assert.equal("0", head.len) -- a HEAD, not a GET capped or read in full
    local echoed = web:requests()[1]
    assert.equal("POST", echoed.method)
    assert.equal("", echoed.headers["x-empty"])
    assert.is_nil(echoed.headers["content-type"]) -- no form type the handler did not ask for
    assert.equal(tostring(2 * 100 + 2), host:records({ msg = "got", payment_id = "3" })[1].fill)
    assert.matches("the response headers are larger than 262144 bytes$",
      host:records({ msg = "got", payment_id = "4" })[1].err)
  end)

  it("sends requests through the proxy the environment names", function()
    local proxy = http_server.start()
    local srv, host = start(proxy, {}, { env = { http_proxy = proxy.url } })
    -- a name that cannot resolve: only the proxy can have answered
    publish(srv, { op = "get", id = 1, base = "http://payments.invalid", path = "/anything" })
    local rec = host:wait_records({ msg = "got" }, 1, 20, "the proxied request")[1]
    assert.equal("404", rec.status)
    assert.equal(1, proxy:stats().requests)
  end)

  it("refuses a request made while the file loads, naming the file", function()
    local dir = helper.handlers_dir({ ["early.lua"] = [[
local ls = require "luastream"
ls.http.get("http://127.0.0.1:1/")
return { stream = "s", group = "g", handle = function() end }
]] })
    local code, out, err = helper.luastream("check", dir)
    assert.equal(1, code)
    assert.matches("early.lua:2: ls.http.get may only be called while handling an entry", out .. err)
  end)
end)
