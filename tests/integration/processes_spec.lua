-- `luastream run --processes N` against a real redis-server: the supervisor,
-- its workers' consumer names, restarts, signals, the shared --http endpoint
-- and hot reload in every worker.
local helper = require "tests.integration.helper"

local READY = { msg = "host ready" }

-- Logs every entry with its n, the consumer that got it and a mark.
local function counter(mark)
  return string.format([[
local ls = require "luastream"
return {
  stream = "s", group = "g",
  handle = function(msg, ctx)
    ls.log.info("handled", { n = msg.n, mark = %q, by = ctx.consumer })
  end,
}
]], mark)
end

local function entries(first, last)
  local cmds = {}
  for n = first, last do
    cmds[#cmds + 1] = { "XADD", "s", "*", "data", string.format('{"n":%d}', n) }
  end
  return cmds
end

-- Replaces path whole (write then rename), as editors and deploys do.
local function replace(path, text)
  helper.write_file(path .. ".tmp", text)
  assert(os.rename(path .. ".tmp", path))
end

-- The pid of worker index's latest process, from the supervisor's log.
-- The pid of worker index's nth start (the first by default), from the
-- supervisor's "worker started" line, waited for: a worker's own lines
-- ("host ready") may be written before the supervisor's line about it.
local function worker_pid(host, index, nth)
  nth = nth or 1
  local recs = host:wait_records({ msg = "worker started", worker = index }, nth, 20,
    "worker " .. index .. " started " .. nth .. " time(s)")
  return tonumber(recs[nth].pid)
end

-- Whether pid is gone (or a zombie nobody reaped yet).
local function gone(pid)
  local state = helper.proc_state(pid)
  return state == nil or state == "Z"
end

local function consumer_names(srv)
  local names = {}
  for name in pairs(srv:consumers("s", "g")) do names[#names + 1] = name end
  table.sort(names)
  return names
end

-- Each n from 1 to last handled exactly once; returns the consumers that did.
local function assert_each_once(host, last)
  local times, by = {}, {}
  for _, r in ipairs(host:records({ msg = "handled" })) do
    times[r.n] = (times[r.n] or 0) + 1
    by[r.by] = true
  end
  for n = 1, last do
    assert.equal(1, times[tostring(n)] or 0, "times entry " .. n .. " was handled")
  end
  return by
end

local function handled(host) return host:count({ msg = "handled" }) end

-- promtool's verdict on a metrics page: exit code and output.
local function promtool_check(page)
  local path = helper.tmpdir("promtool") .. "/page"
  helper.write_file(path, page)
  local code, out, err = helper.run("promtool check metrics < '" .. path .. "'")
  return code, out .. err
end

describe("run --processes", function()
  after_each(helper.cleanup)

  it("shares a group over two workers: each entry once, distinct stable names, restarts, one --http, a clean stop", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["count.lua"] = counter("one") })
    local host = helper.host_start({ "--processes", "2", "--http", "127.0.0.1:0" }, { server = srv, dir = dir })
    local port = helper.health_port(host)
    host:wait_records(READY, 2, 30, "both workers ready")
    helper.wait_until(function()
      local n = srv:blocked_clients("xreadgroup")
      return n >= 2, n .. " blocked"
    end, 10, "both workers blocked in XREADGROUP")

    local N = 200
    srv:pipe(entries(1, N))
    helper.wait_until(function() return handled(host) >= N, handled(host) end, 30, N .. " entries handled")
    local by = assert_each_once(host, N)
    local names = consumer_names(srv)
    assert.equal(2, #names)
    assert.truthy(names[1]:match("%-count%-0$"), names[1])
    assert.truthy(names[2]:match("%-count%-1$"), names[2])
    assert.is_true(by[names[1]] and by[names[2]], "both workers handled entries")

    -- one endpoint for both
    local code, body = helper.http_get(port, "/readyz")
    assert.equal(200, code)
    assert.equal("ready\n", body)
    code, body = helper.http_get(port, "/healthz")
    assert.equal(200, code)
    assert.equal("ok\n", body)
    code, body = helper.http_get(port, "/metrics")
    assert.equal(200, code)
    assert.truthy(body:find('luastream_redis_connected{worker="0"} 1\n', 1, true), body)
    assert.truthy(body:find('luastream_redis_connected{worker="1"} 1\n', 1, true), body)
    assert.truthy(body:find('luastream_worker_up{worker="1"} 1\n', 1, true), body)
    assert.truthy(body:find("\nluastream_workers 2\n", 1, true), body)
    local _, helps = body:gsub("# HELP luastream_redis_connected ", "")
    assert.equal(1, helps)
    local pcode, pout = promtool_check(body)
    assert.equal(0, pcode, pout)

    -- SIGKILL worker 0: started again under the same names, nothing lost
    local pid0 = worker_pid(host, 0)
    assert.is_not_nil(pid0)
    helper.run({ "kill", "-KILL", tostring(pid0) })
    local exited = host:wait_records({ msg = "worker exited: starting it again", worker = 0 }, 1, 10,
      "the supervisor noticing worker 0's death")[1]
    assert.equal("SIGKILL", exited.signal)
    assert.equal(tostring(pid0), exited.pid)
    host:wait_records(READY, 3, 30, "worker 0 ready again")
    assert.is_not.equal(pid0, worker_pid(host, 0, 2))
    srv:pipe(entries(N + 1, 2 * N))
    helper.wait_until(function() return handled(host) >= 2 * N, handled(host) end, 30, "the next entries handled")
    assert_each_once(host, 2 * N)
    assert.same(names, consumer_names(srv))
    code, body = helper.http_get(port, "/metrics")
    assert.equal(200, code)
    assert.truthy(body:find('luastream_worker_restarts_total{worker="0"} 1\n', 1, true), body)
    assert.truthy(body:find('luastream_worker_restarts_total{worker="1"} 0\n', 1, true), body)

    -- SIGTERM: every worker stops, status 0
    local pids = { worker_pid(host, 0, 2), worker_pid(host, 1) }
    assert.equal(0, host:stop(30))
    for _, pid in ipairs(pids) do assert.is_true(gone(pid), "worker " .. pid .. " still runs") end
    assert.equal(2, host:count({ msg = "worker exited", status = 0 }))
    assert.equal(1, host:count({ msg = "every worker stopped", status = 0 }))
    assert.same({}, (srv:pending_ids("s", "g")))
  end)

  it("reloads in every worker on an edit and on SIGHUP; --consumer NAME becomes NAME-I", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["count.lua"] = counter("one") })
    local host = helper.host_start({ "--processes", "2", "--consumer", "svc" }, { server = srv, dir = dir })
    host:wait_records(READY, 2, 30, "both workers ready")
    helper.wait_until(function() return srv:blocked_clients("xreadgroup") >= 2 end, 10, "both reading")
    assert.same({ "svc-0", "svc-1" }, consumer_names(srv))

    replace(dir .. "/count.lua", counter("two"))
    host:wait_records({ msg = "handler reloaded", handler = "count" }, 2, 15, "both workers reloading the edit")
    host:signal("HUP")
    host:wait_records({ msg = "handler reloaded", handler = "count" }, 4, 15, "both workers reloading on SIGHUP")
    assert.equal(1, host:count({ msg = "signal received: every worker reloads" }))

    srv:pipe(entries(1, 50))
    helper.wait_until(function() return handled(host) >= 50 end, 20, "50 entries handled")
    assert_each_once(host, 50)
    assert.equal(50, host:count({ msg = "handled", mark = "two" }))
    assert.equal(0, host:stop(30))
  end)

  it("stops its workers when it is killed (SIGKILL)", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["count.lua"] = counter("one") })
    local host = helper.host_start({ "--processes", "2" }, { server = srv, dir = dir })
    host:wait_records(READY, 2, 30, "both workers ready")
    local pids = { worker_pid(host, 0), worker_pid(host, 1) }
    host:signal("KILL")
    host:wait_exit(10)
    helper.wait_until(function() return gone(pids[1]) and gone(pids[2]) end, 20, "both workers gone")
  end)

  it("exits 1 when a worker's handlers fail to load, as run alone does", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["bad.lua"] = "return {" })
    local host = helper.host_start({ "--processes", "2" }, { server = srv, dir = dir })
    assert.equal(1, host:wait_exit(30))
    assert.is_true(host:count({ msg = "worker failed to start: stopping every worker" }) >= 1)
  end)

  it("refuses a bad --processes", function()
    local code, _, err = helper.luastream("run", "--processes", "0", "dir")
    assert.equal(2, code)
    assert.truthy(err:find("--processes needs a number from 1 to 1024 or auto", 1, true), err)
  end)
end)
