-- --http ADDR:PORT: /healthz and /readyz over real HTTP, from a plain TCP
-- client (helper.http: LuaJIT FFI sockets, no curl). Readiness follows
-- the server: 503 while Redis is down or hung, 200 again once it is back.
local helper = require "tests.integration.helper"

local READY = 'msg="host ready"'

local POST = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger",
  handle = function(payment, ctx)
    ls.log.info("payment started", { payment_id = payment.id })
    ls.sleep(payment.sleep or 0)
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

-- Waits until GET /readyz answers status (and a body matching pattern).
local function wait_ready(port, status, pattern, timeout_s)
  local last
  return helper.wait_until(function()
    local code, body = helper.http_get(port, "/readyz")
    last = tostring(code) .. " " .. tostring(body)
    if code == status and (not pattern or (body and body:find(pattern, 1, true))) then return body end
    return false, "last answer: " .. last
  end, timeout_s or 20, "/readyz " .. status .. (pattern and (" " .. pattern) or ""))
end

describe("the health endpoint", function()
  after_each(helper.cleanup)

  it("answers /healthz and /readyz over HTTP/1.1, 404 elsewhere, 405 for other methods", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--http", "127.0.0.1:0" },
      { server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }) })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })

    local code, body, text = helper.http_get(port, "/healthz")
    assert.equal(200, code)
    assert.equal("ok\n", body)
    assert.truthy(text:find("\r\nConnection: close\r\n", 1, true), text)
    assert.truthy(text:find("\r\nContent-Length: 3\r\n", 1, true), text)
    assert.truthy(text:find("\r\nContent-Type: text/plain", 1, true), text)

    code, body = helper.http_get(port, "/readyz?probe=1")
    assert.equal(200, code)
    assert.equal("ready\n", body)

    code = helper.http_get(port, "/nothing")
    assert.equal(404, code)
    local _
    code, _, text = helper.http_get(port, "/readyz", { method = "POST" })
    assert.equal(405, code)
    assert.truthy(text:find("\r\nAllow: GET\r\n", 1, true), text)
    code = helper.http(port, "GET /healthz\r\n\r\n") -- not HTTP/1.x
    assert.equal(400, code)
    -- headers may come in pieces and with bare LF line ends
    code, body = helper.http(port, "GET /healthz HTTP/1.0\nHost: x\n\n")
    assert.equal(200, code)
    assert.equal("ok\n", body)

    assert.equal(0, host:stop())
    assert.is_false(helper.port_open(port), "the port is closed once the host has stopped")
  end)

  it("reports redis unreachable until the server is there, and again when it is killed", function()
    local port_redis = helper.free_port()
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, {
      url = "redis://127.0.0.1:" .. port_redis,
      dir = helper.handlers_dir({ ["post.lua"] = POST }),
    })
    local port = helper.health_port(host)
    -- alive, not ready
    assert.equal(200, (helper.http_get(port, "/healthz")))
    local body = wait_ready(port, 503, "redis unreachable")
    assert.equal("redis unreachable (redis://127.0.0.1:" .. port_redis .. ")\n", body)

    -- appendfsync always: Redis answers a write once it is in the AOF, so the
    -- group the host created survives the SIGKILL below (with everysec, a busy
    -- machine postpones the AOF write and the restarted server has no group:
    -- the host creates it again at `start` = new, after the entry published)
    local srv = helper.redis_start({ port = port_redis, appendonly = true, args = { "--appendfsync", "always" } })
    host:wait_log(READY, 30, { plain = true })
    wait_ready(port, 200)

    srv:kill()
    wait_ready(port, 503, "redis unreachable", 10)
    assert.equal(200, (helper.http_get(port, "/healthz")), "the loop still runs")
    srv:restart()
    wait_ready(port, 200, nil, 30)
    -- and it reads again
    helper.publish(srv, "payments", '{"id":1}')
    host:wait_records({ msg = "payment posted" }, 1, 20, "a payment after the restart")
    assert.equal(0, host:stop())
  end)

  it("reports a subscription stuck when the server stops answering, ready again when it resumes", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--http", "127.0.0.1:0" },
      { server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }) })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    wait_ready(port, 200)
    -- Stopped right after the host renewed its consumer lease (TTL 20 s,
    -- renewed every 5 s): the next renewal then goes unanswered 5 s on, and
    -- the command connection is dropped 10 s after that, past the 12 s in
    -- which the read counts as stuck. Stopped at any moment, a renewal just
    -- before could drop it first, and /readyz would rightly say unreachable.
    local lease = assert(srv:call("KEYS", "luastream:consumer:*"))[1]
    assert(lease, "the host's consumer lease")
    helper.wait_until(function()
      local ttl = tonumber(srv:call("PTTL", lease))
      return ttl >= 19600, ttl
    end, 10, "a renewal of the lease " .. lease)
    srv.proc:kill("STOP") -- connections stay open; nothing is answered
    finally(function() if srv:alive() then srv.proc:kill("CONT") end end)
    -- a `new` read blocks 4 s: stuck after 3 times that (before the command
    -- timeout, 10 s past the BLOCK, drops the connection)
    local body = wait_ready(port, 503, "stuck", 15)
    assert.truthy(body:find("^subscription post: stuck: a read unanswered for %d+ ms\n$"), body)
    srv.proc:kill("CONT")
    wait_ready(port, 200, nil, 15)
    assert.equal(0, host:stop())
  end)

  it("is not ready while stopping, alive until the host has stopped", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--http", "127.0.0.1:0" },
      { server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }) })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    helper.publish(srv, "payments", '{"id":1,"sleep":1500}')
    host:wait_records({ msg = "payment started" }, 1, 20, "the handler asleep")
    host:signal("TERM")
    host:wait_log("stopping: finishing running handlers", 10, { plain = true })
    local code, body = helper.http_get(port, "/readyz")
    assert.equal(503, code)
    assert.equal("stopping\n", body)
    assert.equal(200, (helper.http_get(port, "/healthz")))
    assert.equal(0, host:wait_exit(10))
    assert.equal(1, host:count({ msg = "payment posted" }))
  end)

  it("is not ready with no handler running, and picks the directory up again when it comes back", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = POST })
    local host = helper.host_start({ "--http", "127.0.0.1:0" }, { server = srv, dir = dir })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    wait_ready(port, 200)
    -- a deploy removes the directory ...
    assert(os.execute("rm -rf '" .. dir .. "'"))
    host:wait_records({ msg = "subscription stopped", handler = "post" }, 1, 10)
    local body = wait_ready(port, 503, "no handlers running", 10)
    assert.equal("no handlers running\n", body)
    assert.equal(200, (helper.http_get(port, "/healthz")))
    -- ... and puts it back
    assert(os.execute("mkdir '" .. dir .. "'"))
    helper.write_file(dir .. "/post.lua", POST)
    host:wait_records({ msg = "handler added", handler = "post" }, 1, 15, "the handler started again")
    wait_ready(port, 200, nil, 15)
    helper.publish(srv, "payments", '{"id":7}')
    host:wait_records({ msg = "payment posted", payment_id = "7" }, 1, 10, "a payment after the directory came back")
    -- and watches the new directory: an edit in place (the directory's own
    -- stat unchanged) is picked up
    helper.write_file(dir .. "/post.lua", POST .. "-- edited\n")
    host:wait_records({ msg = "handler reloaded", handler = "post" }, 1, 15, "the edit in the new directory")
    assert.equal(0, host:stop())
  end)

  it("answers and stops while a reloaded file loops at load (--load-timeout)", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["post.lua"] = POST })
    local host = helper.host_start({ "--http", "127.0.0.1:0", "--load-timeout", "1s" }, { server = srv, dir = dir })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    helper.write_file(dir .. "/post.lua.tmp", "while true do end\n")
    assert(os.rename(dir .. "/post.lua.tmp", dir .. "/post.lua"))
    local rec = host:wait_records({ msg = "handler reload failed, the running version stays" }, 1, 15)[1]
    assert.truthy(rec.error:find(dir .. "/post.lua", 1, true), rec.error)
    assert.truthy(rec.error:find("still running after 1000ms", 1, true), rec.error)
    assert.equal(200, (helper.http_get(port, "/healthz")))
    wait_ready(port, 200)
    helper.publish(srv, "payments", '{"id":8}')
    host:wait_records({ msg = "payment posted", payment_id = "8" }, 1, 10, "the old version still posting")
    assert.equal(0, host:stop(10))
  end)

  it("cuts off a client trickling its request 2 s after it connected, however slowly it sends", function()
    local ffi = require "ffi"
    local sys = require "tests.integration.support.sys"
    local srv = helper.redis_start()
    local host = helper.host_start({ "--http", "127.0.0.1:0" },
      { server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }) })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    local fd = sys.C.socket(sys.AF_INET, sys.SOCK_STREAM, 0)
    local sa = sys.sockaddr(port)
    assert.equal(0, sys.C.connect(fd, sa, ffi.sizeof(sa)))
    local started = helper.now()
    local line = "GET /healthz HTTP/1.1\r\n"
    sys.C.write(fd, line, #line)
    -- then a header byte every 100 ms, never the blank line, until closed
    local pfd = ffi.new("ls_pollfd[1]")
    pfd[0].fd, pfd[0].events = fd, sys.POLLIN
    local buf, closed_after = ffi.new("char[64]"), nil
    while helper.now() - started < 10 do
      if sys.C.poll(pfd, 1, 100) > 0 then
        -- closed (or reset, a byte being in flight) without an answer
        assert.truthy(tonumber(sys.C.read(fd, buf, 64)) <= 0, "an answer to an unfinished request")
        closed_after = helper.now() - started
        break
      end
      sys.C.write(fd, "X", 1)
    end
    sys.C.close(fd)
    assert.truthy(closed_after, "still open after 10 s")
    assert.truthy(closed_after >= 1.9, closed_after) -- the loop's clock is read once a turn
    assert.truthy(closed_after < 4.5, closed_after) -- the deadline, the sweep's 250 ms, and slack
    assert.equal(200, (helper.http_get(port, "/healthz")))
    assert.equal(0, host:stop())
  end)

  it("refuses a bad or busy --http address", function()
    local dir = helper.handlers_dir({ ["post.lua"] = POST })
    local code, _, err = helper.luastream("run", "--http", "8080", dir, { timeout = 10 })
    assert.equal(2, code)
    assert.truthy(err:find("--http needs ADDR:PORT", 1, true), err)
    code, _, err = helper.luastream("run", "--http", "127.0.0.1:70000", dir, { timeout = 10 })
    assert.equal(2, code)
    assert.truthy(err:find("0 to 65535", 1, true), err)

    local srv = helper.redis_start()
    local a = helper.host_start({ "--http", "127.0.0.1:0" }, { server = srv, dir = dir })
    local port = helper.health_port(a)
    code, _, err = helper.luastream("run", "--redis", srv.url, "--http", "127.0.0.1:" .. port, dir, { timeout = 10 })
    assert.equal(1, code)
    assert.truthy(err:find("cannot listen on 127.0.0.1:" .. port, 1, true), err)
    assert.equal(0, a:stop())
  end)
end)
