-- Configuration mistakes say what is wrong, at once: credentials and rights the
-- server refuses (at start-up, while running, in one-shot commands), empty
-- URLs, the URL from a file (--redis-file) so the password stays out of argv,
-- durations (one rule for the command line and handler files), --http on
-- every interface, dead-letter streams that do not exist, reserved headers.
local helper = require "tests.integration.helper"
local ffi = require "ffi"

pcall(ffi.cdef, "int chmod(const char *path, unsigned int mode);")
local C = ffi.C

local READY = 'msg="host ready"'
local SECRET, WRONG = "s3cret-Pw-4711", "wr0ng-Pw-0815"

local POST = [[
local ls = require "luastream"

return {
  stream = "payments", group = "ledger", start = "beginning",
  handle = function(payment, ctx)
    ls.log.info("payment posted", { payment_id = payment.id })
  end,
}
]]

-- Runs `luastream ARGS...` and returns code, stdout, stderr and the seconds it took.
local function timed(...)
  local t0 = helper.now()
  local code, out, err = helper.luastream(...)
  return code, out, err, helper.now() - t0
end

describe("configuration errors", function()
  after_each(helper.cleanup)

  describe("credentials and rights the server refuses", function()
    it("run exits 1 at once on a wrong password, naming the server and the refusal", function()
      local srv = helper.redis_start({ requirepass = SECRET })
      local url = "redis://:" .. WRONG .. "@127.0.0.1:" .. srv.port
      local dir = helper.handlers_dir({ ["post.lua"] = POST })
      local code, out, err, took = timed("run", "--redis", url, dir, { timeout = 10 })
      assert.equal(1, code, out .. err)
      assert(took < 5, "took " .. took .. " s")
      assert.matches("cannot start: redis://:***@127.0.0.1:" .. srv.port .. " refused: authentication failed: WRONGPASS",
        err, 1, true)
      helper.assert_no_secret(WRONG, out, err)
      assert.equal(0, srv:call("EXISTS", "payments"))
      -- logged under the host's connections: a standalone server gets none
      -- of the cluster router's own
      assert.matches('msg="redis authentication failed"', err, 1, true)
      assert.is_nil(err:find('conn="cluster map"', 1, true), err)
    end)

    it("run exits 1 at once without a password (NOAUTH)", function()
      local srv = helper.redis_start({ requirepass = SECRET })
      local dir = helper.handlers_dir({ ["post.lua"] = POST })
      local code, out, err, took = timed("run", "--redis", "redis://127.0.0.1:" .. srv.port, dir, { timeout = 10 })
      assert.equal(1, code, out .. err)
      assert(took < 5, "took " .. took .. " s")
      assert.matches("refused: authentication failed: NOAUTH", err, 1, true)
    end)

    it("run exits 1 at once when the user may not run what it needs (NOPERM)", function()
      local srv = helper.redis_start()
      srv:cli("ACL", "SETUSER", "app", "on", ">apppw", "~*", "+@all", "-info")
      local dir = helper.handlers_dir({ ["post.lua"] = POST })
      local code, out, err, took = timed("run", "--redis", "redis://app:apppw@127.0.0.1:" .. srv.port, dir,
        { timeout = 10 })
      assert.equal(1, code, out .. err)
      assert(took < 5, "took " .. took .. " s")
      assert.matches("refused: permission denied: INFO server: NOPERM", err, 1, true)

      srv:cli("ACL", "SETUSER", "noping", "on", ">pw", "~*", "-@all", "+auth")
      code, out, err = helper.luastream("run", "--redis", "redis://noping:pw@127.0.0.1:" .. srv.port, dir,
        { timeout = 10 })
      assert.equal(1, code, out .. err)
      assert.matches("refused: permission denied: NOPERM", err, 1, true)
    end)

    it("a password changed while running: an error at every attempt, /readyz says why, back when fixed", function()
      local srv = helper.redis_start({ requirepass = SECRET })
      local host = helper.host_start({ "--http", "127.0.0.1:0" }, {
        server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }),
      })
      host:wait_log(READY, 20, { plain = true })
      local port = helper.health_port(host)
      assert.equal(200, (helper.http_get(port, "/readyz")))

      srv:cli("CONFIG", "SET", "requirepass", WRONG)
      srv.password = WRONG -- the helper's own redis-cli calls
      local mark = host:mark()
      srv:cli("CLIENT", "KILL", "TYPE", "normal")
      host:wait_records(function(r)
        return r._pos > mark and r.msg == "redis authentication failed" and r.conn == "command"
      end, 3, 20, "the refusal logged at every attempt")
      local code, body = helper.http_get(port, "/readyz")
      assert.equal(503, code)
      assert.matches("^redis authentication failed: WRONGPASS", body)
      assert.matches("127.0.0.1:" .. srv.port, body, 1, true)
      assert.is_true(host:alive())

      srv:cli("CONFIG", "SET", "requirepass", SECRET)
      srv.password = SECRET
      helper.wait_until(function() return helper.http_get(port, "/readyz") == 200 end, 20, "/readyz 200 again")
      assert.equal(0, host:stop())
      helper.assert_no_secret(SECRET, host:log())
    end)

    it("publish and dead-letters fail at once on a closed port or a refusal", function()
      local closed = helper.free_port()
      local srv = helper.redis_start({ requirepass = SECRET })
      local dl_dir = helper.handlers_dir({
        ["h.lua"] = [[return { stream = "s", group = "g", dead_letter = "dl", handle = function() end }]],
      })
      local cases = {
        { { "publish", "--redis", "redis://127.0.0.1:" .. closed, "payments", "{}" }, "cannot reach redis://127.0.0.1:" .. closed },
        { { "dead-letters", "list", "--redis", "redis://127.0.0.1:" .. closed, "dl" }, "cannot reach" },
        { { "dead-letters", "replay", "--redis", "redis://127.0.0.1:" .. closed, dl_dir, "dl", "--all" }, "cannot reach" },
        { { "dead-letters", "delete", "--redis", "redis://127.0.0.1:" .. closed, "dl", "--all" }, "cannot reach" },
        { { "publish", "--redis", "redis://:" .. WRONG .. "@127.0.0.1:" .. srv.port, "payments", "{}" },
          "authentication failed: WRONGPASS" },
        { { "dead-letters", "list", "--redis", "redis://127.0.0.1:" .. srv.port, "dl" }, "authentication failed: NOAUTH" },
      }
      for _, case in ipairs(cases) do
        local code, out, err, took = timed(unpack(case[1]))
        assert.equal(1, code, table.concat(case[1], " ") .. ": " .. out .. err)
        -- "at once": the first failed attempt ends it, not the 10 s client
        -- timeout (CLIENT_TIMEOUT_MS), whose message says "cannot reach" too.
        -- 5 s tells the two apart on a busy machine; 1.5 s did not always
        -- (0.9 s seen idle with the sanitizer build)
        assert(took < 5, table.concat(case[1], " ") .. " took " .. took .. " s")
        assert.matches(case[2], err, 1, true)
        helper.assert_no_secret(WRONG, out, err)
      end
    end)
  end)

  describe("where the URL comes from", function()
    it("refuses an empty --redis or REDIS_URL, naming it", function()
      local code, _, err = helper.luastream("publish", "--redis", "", "payments", "{}")
      assert.equal(2, code)
      assert.matches("--redis is empty", err, 1, true)
      code, _, err = helper.luastream("dead-letters", "list", "dl", { env = { REDIS_URL = "" } })
      assert.equal(2, code)
      assert.matches("REDIS_URL is empty", err, 1, true)
      code, _, err = helper.luastream("run", "--redis", "", helper.handlers_dir({ ["post.lua"] = POST }))
      assert.equal(2, code)
      assert.matches("--redis is empty", err, 1, true)
    end)

    it("--redis-file: the URL from a file, never in argv; clear errors and a warning for a readable file", function()
      local srv = helper.redis_start({ requirepass = SECRET })
      local path = helper.tmpdir("conf") .. "/redis-url"
      helper.write_file(path, srv.url .. "  \n# the rest is ignored\n")
      C.chmod(path, tonumber("600", 8))
      local code, out, err = helper.luastream("publish", "--redis-file", path, "payments", helper.payment(1, "acme", 5))
      assert.equal(0, code, err)
      assert.equal("", err)
      assert.equal(helper.trim(out), srv:xrange("payments")[1].id)

      local host = helper.host_start({ "--redis-file", path }, { url = false, dir = helper.handlers_dir({ ["post.lua"] = POST }) })
      host:wait_log(READY, 20, { plain = true })
      host:wait_records({ msg = "payment posted" }, 1, 20, "the payment posted")
      local cmdline = helper.read_file("/proc/" .. host.pid .. "/cmdline")
      assert.matches("--redis-file", cmdline, 1, true)
      helper.assert_no_secret(SECRET, cmdline, host:log())
      assert.equal(0, host:stop())

      C.chmod(path, tonumber("644", 8))
      local _
      code, _, err = helper.luastream("publish", "--redis-file", path, "payments", "{}")
      assert.equal(0, code, err)
      assert.matches("warning: --redis-file " .. path .. " can be read by every user", err, 1, true)

      local empty = helper.tmpdir("conf") .. "/empty"
      helper.write_file(empty, " \n" .. srv.url .. "\n")
      code, _, err = helper.luastream("publish", "--redis-file", empty, "payments", "{}")
      assert.equal(2, code)
      assert.matches("--redis-file " .. empty .. ": the first line is empty", err, 1, true)
      code, _, err = helper.luastream("publish", "--redis-file", empty .. ".missing", "payments", "{}")
      assert.equal(2, code)
      assert.matches("cannot read it: No such file or directory", err, 1, true)
      code, _, err = helper.luastream("publish", "--redis-file", path, "--redis", srv.url, "payments", "{}")
      assert.equal(2, code)
      assert.matches("not both", err, 1, true)
    end)
  end)

  describe("durations", function()
    it("--shutdown-timeout takes 1h; a bare number is refused with the unit to add", function()
      local srv = helper.redis_start()
      local dir = helper.handlers_dir({ ["post.lua"] = POST })
      local code, _, err = helper.luastream("run", "--redis", srv.url, "--shutdown-timeout", "30", dir)
      assert.equal(2, code)
      assert.matches("--shutdown-timeout 30: add a unit, e.g. 30s", err, 1, true)
      local host = helper.host_start({ "--shutdown-timeout", "1h" }, { server = srv, dir = dir })
      host:wait_log(READY, 20, { plain = true })
      assert.equal(0, host:stop())
    end)

    it("a handler field: a number is milliseconds, text needs a unit", function()
      local function reclaim(min_idle)
        return string.format([[
return {
  stream = "payments", group = "ledger", read = "reclaim", min_idle = %s,
  handle = function() end,
}
]], min_idle)
      end
      local code, out, err = helper.luastream("check", helper.handlers_dir({ ["a.lua"] = reclaim('"30000"') }))
      assert.equal(1, code, out .. err)
      assert.matches("a.lua:%d+: field 'min_idle' has no unit: add one, e.g. \"30000ms\"", err)
      for _, ok in ipairs { "30000", '"30s"', '"1h"', '"500ms"', '"2m"' } do
        code, out, err = helper.luastream("check", helper.handlers_dir({ ["a.lua"] = reclaim(ok) }))
        assert.equal(0, code, ok .. ": " .. out .. err)
      end
    end)
  end)

  it("--http :PORT answers on 127.0.0.1 and ::1", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--http", ":0" }, { server = srv, dir = helper.handlers_dir({ ["post.lua"] = POST }) })
    host:wait_log(READY, 20, { plain = true })
    local port = helper.health_port(host)
    assert.equal(200, (helper.http_get(port, "/healthz")))
    assert.equal(200, (helper.http_get(port, "/healthz", { family = "6" })))
    assert.equal(0, host:stop())
  end)

  it("dead-letters on a stream that does not exist: 0 dead letters, exit 0 (an --id: exit 1, saying so); another type: exit 1", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({
      ["h.lua"] = [[return { stream = "payments", group = "g", dead_letter = "payments.dead", handle = function() end }]],
    })
    local cases = {
      { { "list", "payments.dead" }, 0, "0 dead letters on payments.dead (no such stream on redis://127.0.0.1:" .. srv.port },
      { { "replay", dir, "payments.dead", "--all" }, 0, "replayed 0 dead letters from payments.dead" },
      { { "delete", "payments.dead", "--all" }, 0, "0 dead letters on payments.dead (no such stream on redis://127.0.0.1:" .. srv.port },
      { { "replay", dir, "payments.dead", "--id", "1-1" }, 1, "no entry 1-1 on payments.dead" },
      { { "delete", "payments.dead", "--id", "1-1" }, 1, "no entry 1-1 on payments.dead: there is no such stream" },
    }
    for _, case in ipairs(cases) do
      local argv = { "dead-letters", case[1][1], "--redis", srv.url }
      for i = 2, #case[1] do argv[#argv + 1] = case[1][i] end
      local code, out, err = helper.luastream(unpack(argv))
      assert.equal(case[2], code, table.concat(argv, " ") .. ": " .. out .. err)
      assert.matches(case[3], out .. err, 1, true)
    end
    srv:cli("SET", "payments.dead", "x")
    for _, args in ipairs { { "list", "payments.dead" }, { "delete", "payments.dead", "--all" } } do
      local code, _, err = helper.luastream("dead-letters", args[1], "--redis", srv.url, unpack(args, 2))
      assert.equal(1, code)
      assert.matches("is a string, not a stream", err, 1, true)
    end
    local code, _, err = helper.luastream("dead-letters", "replay", "--redis", srv.url, dir, "payments.dead", "--all")
    assert.equal(1, code)
    assert.matches("payments.dead is a string, not a stream", err, 1, true)
  end)

  it("publish refuses reserved header names, naming the header", function()
    local srv = helper.redis_start()
    for _, h in ipairs { "delivery-count=5", "data=x", "retry-group=ledger", "original-id=1-1", "idle-ms=1",
      "handler-version=v", "dead-letter-stream=x", "partition-key=acme", "Delivery-Count=5" } do
      local code, out, err = helper.luastream("publish", "--redis", srv.url, "payments", "{}", "--header", h)
      assert.equal(2, code, h .. ": " .. out .. err)
      assert.matches("--header " .. h:match("^[^=]+") .. ": a reserved header name", err, 1, true)
    end
    assert.equal(0, srv:call("EXISTS", "payments"))
    local code, _, err = helper.luastream("publish", "--redis", srv.url, "payments", "{}", "--header", "trace-id=1")
    assert.equal(0, code, err)
  end)
end)
