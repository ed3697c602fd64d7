-- The integration helper's own checks: private redis-servers, commands,
-- log waits and process handling. Needs redis-server, not the luastream binary
-- (a small shell script stands in for the host).
local helper = require "tests.integration.helper"

-- A stand-in for `luastream run`: logs "host ready" with the URL it was given,
-- then waits for SIGTERM and exits 0.
-- The trap is set before "host ready": a SIGTERM right after it is handled.
local FAKE_HOST = [[#!/bin/sh
trap 'echo "time=2024-01-01T00:00:01.250Z level=info msg=\"stopped\"" >&2; exit 0' TERM
echo "time=2024-01-01T00:00:00.000Z level=info msg=\"host ready\" redis=$3 args=\"$*\"" >&2
while :; do sleep 0.02; done
]]

local function script(src)
  local path = helper.tmpdir("fake") .. "/luastream"
  helper.write_file(path, src)
  assert(os.execute("chmod +x " .. path) == 0)
  return path
end

describe("integration helper", function()
  after_each(helper.cleanup)

  it("starts a private redis-server on a free loopback port and stops it", function()
    local srv = helper.redis_start()
    assert.is_true(srv.port > 1024)
    assert.equal("redis://127.0.0.1:" .. srv.port, srv.url)
    assert.equal("PONG", srv:cli("PING"))
    assert.equal("OK", srv:cli("SET", "k", "two words"))
    assert.equal("two words", srv:call("GET", "k"))
    assert.is_nil(srv:call("GET", "missing"))
    local id = srv:cli("XADD", "s", "*", "data", '{"id":1}', "partition-key", "acme")
    assert.truthy(id:match("^%d+%-%d+$"))
    local entries = srv:xrange("s")
    assert.equal(1, #entries)
    assert.same({ data = '{"id":1}', ["partition-key"] = "acme" }, entries[1].fields)
    local value, err = srv:call("XINFO", "GROUPS", "nosuchkey")
    assert.is_nil(value)
    assert.matches("no such key", err)
    srv:stop()
    assert.is_false(srv:alive())
    assert.is_false(helper.port_open(srv.port))
  end)

  it("hands out ports below the ephemeral range that nobody listens on", function()
    local lo = tonumber(helper.read_file("/proc/sys/net/ipv4/ip_local_port_range"):match("%d+"))
    local seen = {}
    for _ = 1, 20 do
      local port = helper.free_port()
      assert.is_true(port < lo)
      assert.is_nil(seen[port])
      assert.is_false(helper.port_open(port))
      seen[port] = true
    end
  end)

  it("restarts a killed server on the same port and folder, keeping AOF data", function()
    -- always: the XADD is in the AOF once answered (everysec may postpone it)
    local srv = helper.redis_start({ appendonly = true, args = { "--appendfsync", "always" } })
    local port = srv.port
    srv:cli("XADD", "payments", "*", "data", "{}")
    srv:kill()
    assert.is_false(srv:alive())
    srv:restart()
    assert.equal(port, srv.port)
    assert.equal(1, srv:xlen("payments"))
  end)

  it("starts a server on a given port", function()
    local port = helper.free_port()
    local srv = helper.redis_start({ port = port })
    assert.equal(port, srv.port)
    assert.equal("PONG", srv:cli("PING"))
  end)

  it("authenticates its own commands on a server with requirepass", function()
    local srv = helper.redis_start({ requirepass = "pw-for-helper-42" })
    assert.equal("redis://:pw-for-helper-42@127.0.0.1:" .. srv.port, srv.url)
    assert.equal("redis://:***@127.0.0.1:" .. srv.port, srv.url_redacted)
    assert.equal("PONG", srv:cli("PING"))
    local _, out = helper.run({ "redis-cli", "-p", tostring(srv.port), "PING" })
    assert.matches("NOAUTH", out)
  end)

  it("pipes many commands through one redis-cli", function()
    local srv = helper.redis_start()
    assert.equal(500, srv:pipe(helper.payment_commands(1, 500, 7)))
    assert.equal(500, srv:xlen("payments"))
    local first = srv:xrange("payments", "-", "+")[1]
    assert.equal(helper.payment(1, "acct-1", 101), first.fields.data)
    assert.equal("acct-1", first.fields["partition-key"])
  end)

  it("captures MONITOR output as parsed commands", function()
    local srv = helper.redis_start()
    local mon = srv:monitor()
    srv:cli("XADD", "s", "*", "data", '{"a":"b c"}')
    local cmds = helper.wait_until(function()
      for _, c in ipairs(mon:commands()) do
        if c.args[1] == "XADD" then return c end
      end
    end, 5, "XADD in MONITOR")
    assert.same({ "XADD", "s", "*", "data", '{"a":"b c"}' }, cmds.args)
    assert.matches("^127%.0%.0%.1:%d+$", cmds.client)
    assert.same({ "a", "x y", 'q"', "\n" }, helper._monitor_args([["a" "x y" "q\"" "\n"]]))
  end)

  it("runs commands and returns exit code, stdout and stderr", function()
    local code, out, err = helper.run({ "sh", "-c", "echo out; echo err >&2; exit 3" })
    assert.equal(3, code)
    assert.equal("out\n", out)
    assert.equal("err\n", err)
    code, out = helper.run("cat", { stdin = "fed\n" })
    assert.equal(0, code)
    assert.equal("fed\n", out)
    code, out = helper.run("echo \"[$LS_X][${REDIS_URL-unset}]\"", { env = { LS_X = "y" } })
    assert.equal(0, code)
    assert.equal("[y][unset]\n", out)
    assert.has_error(function() helper.run({ "sleep", "5" }, { timeout = 0.2 }) end)
  end)

  it("waits on a condition and names it on timeout", function()
    local n = 0
    assert.equal(3, helper.wait_until(function()
      n = n + 1
      return n >= 3 and n
    end, 5, "three polls"))
    local t0 = helper.now()
    local ok, err = pcall(helper.wait_until, function() return false, "still 0" end, 0.2, "the impossible")
    assert.is_false(ok)
    assert.matches("timed out after 0.2s waiting for the impossible: still 0", err, 1, true)
    assert.is_true(helper.now() - t0 < 2)
  end)

  it("parses logfmt lines and log timestamps", function()
    local rec = helper.parse_logfmt(
      [[time=2024-05-01T12:00:00.250Z level=error handler=post msg="handler failed" id=1-0 error="a.lua:3: boom\n\tstack \"x\"" flag]])
    assert.equal("error", rec.level)
    assert.equal("post", rec.handler)
    assert.equal("handler failed", rec.msg)
    assert.equal("1-0", rec.id)
    assert.equal('a.lua:3: boom\n\tstack "x"', rec.error)
    assert.is_true(rec.flag)
    local a = helper.parse_time("2024-05-01T12:00:00.250Z")
    local b = helper.parse_time("2024-05-02T00:00:01.5Z")
    assert.near(12 * 3600 + 1.25, b - a, 1e-6)
    assert.equal(1714564800.25, helper.parse_time("1714564800.25"))
    assert.is_nil(helper.parse_time("yesterday"))
  end)

  it("compares stream ids", function()
    assert.equal(-1, helper.id_cmp("1-9", "2-0"))
    assert.equal(1, helper.id_cmp("10-0", "9-5"))
    assert.equal(0, helper.id_cmp("5-5", "5-5"))
    assert.equal(-1, helper.id_cmp("5-5", "5-10"))
  end)

  it("writes handler folders", function()
    local dir = helper.handlers_dir({ ["a.lua"] = "return 1\n", ["b.lua"] = "return 2\n" })
    assert.equal("return 1\n", helper.read_file(dir .. "/a.lua"))
    assert.equal("return 2\n", helper.read_file(dir .. "/b.lua"))
    assert.equal(2, helper.line_of("x\ny = 1\n", "y ="))
  end)

  it("runs a host in the background: log waits, signals, exit code", function()
    local bin = script(FAKE_HOST)
    local dir = helper.handlers_dir({})
    local h = helper.host_start({ "--consumer", "host-a" }, { url = "redis://127.0.0.1:1", dir = dir, bin = bin })
    local line = h:wait_log('msg="host ready"', 5, { plain = true })
    assert.matches("redis=redis://127.0.0.1:1", line, 1, true)
    local rec = h:records({ msg = "host ready" })[1]
    assert.equal("run --redis redis://127.0.0.1:1 --consumer host-a " .. dir, rec.args)
    assert.is_true(h:alive())
    local mark = h:mark()
    h:signal("TERM")
    assert.equal(0, h:wait_exit(5))
    assert.equal(1, #h:lines("stopped", true))
    assert.equal(1, #h:records(function(r) return r._pos > mark end))
  end)

  it("stops a host that ignores SIGTERM and reports it", function()
    local bin = script("#!/bin/sh\ntrap '' TERM\necho started >&2\nwhile :; do sleep 0.02; done\n")
    local h = helper.host_start({}, { url = false, dir = "/nonexistent", bin = bin })
    h:wait_log("started", 5)
    local ok, err = pcall(h.stop, h, 0.3)
    assert.is_false(ok)
    assert.matches("did not stop", err)
    assert.is_false(h:alive())
  end)

  it("fails fast when the host exits while a log line is awaited", function()
    local bin = script("#!/bin/sh\necho 'time=x level=error msg=\"cannot start\"' >&2\nexit 2\n")
    local h = helper.host_start({}, { url = false, dir = "/nonexistent", bin = bin })
    local t0 = helper.now()
    local ok, err = pcall(h.wait_log, h, "host ready", 20, { plain = true })
    assert.is_false(ok)
    assert.matches("host exited %(code 2%)", err)
    assert.matches("cannot start", err)
    assert.is_true(helper.now() - t0 < 5)
  end)

  it("fails loudly on a sanitizer report in the host's output", function()
    for _, report in ipairs {
      "==42==ERROR: AddressSanitizer: heap-use-after-free on address 0x1",
      "==42==ERROR: LeakSanitizer: detected memory leaks",
      "host/lanes.c:10:5: runtime error: signed integer overflow",
    } do
      local bin = script("#!/bin/sh\necho 'time=x level=info msg=\"host ready\"' >&2\necho '" .. report .. "' >&2\nexit 0\n")
      local h = helper.host_start({}, { url = false, dir = "/nonexistent", bin = bin })
      local ok, err = pcall(h.wait_exit, h, 5)
      assert.is_false(ok)
      assert.matches("sanitizer report", err, 1, true)
      assert.matches(report, err, 1, true)
    end
    -- a handler may log the words: only the host's non-logfmt lines count
    local bin = script("#!/bin/sh\necho 'time=x level=info msg=\"said runtime error: x\"' >&2\nexit 0\n")
    local h = helper.host_start({}, { url = false, dir = "/nonexistent", bin = bin })
    assert.equal(0, h:wait_exit(5))
  end)

  it("cleanup reports a sanitizer report of a host nobody waited for", function()
    local bin = script("#!/bin/sh\necho '==7==ERROR: AddressSanitizer: SEGV' >&2\nexit 1\n")
    local h = helper.host_start({}, { url = false, dir = "/nonexistent", bin = bin })
    helper.wait_until(function() return not h:alive() end, 5, "the fake host to exit")
    local ok, err = pcall(helper.cleanup)
    assert.is_false(ok)
    assert.matches("AddressSanitizer: SEGV", err, 1, true)
  end)
end)
