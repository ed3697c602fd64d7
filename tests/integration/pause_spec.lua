-- `luastream pause` and `luastream resume` against a real redis-server: the
-- command returns once Redis holds the pause; `status` (text and JSON),
-- /readyz (a note, still 200) and /metrics (luastream_paused) show it; what
-- a host read and did not start goes back uncounted and runs after resume.
-- The #slow ones: three hosts, no handler starts more than 1 s after pause
-- returns (by each handler's first log line, on the machine's clock, which
-- Redis's TIME shares), work resumes after resume and after --for.
local helper = require "tests.integration.helper"
local json = require "cjson"

local READY = 'msg="host ready"'

local JOBS = [[
local ls = require "luastream"

return {
  stream = "jobs", group = "work", start = "beginning",
  read = "claiming", claim_fallback = true, min_idle = "60s",
  workers = 2,
  handle = function(job, ctx)
    ls.log.info("job started", { n = job.n }) -- the log line's time is the start's
    ls.redis.call("EVAL", "local t = redis.call('TIME') " ..
      "return redis.call('RPUSH', KEYS[1], string.format('%d %s %s', t[1] * 1000000 + t[2], ARGV[1], ARGV[2]))",
      1, "starts", ctx.headers[ls.DELIVERY_COUNT_HEADER] or "?", tostring(job.n))
    ls.sleep(job.sleep or 0)
  end,
}
]]

local function starts(srv)
  local out = {}
  for _, rec in ipairs(srv:call("LRANGE", "starts", "0", "-1") or {}) do
    local t, dc, n = rec:match("^(%d+) (%S+) (%S+)$")
    out[#out + 1] = { us = tonumber(t), count = dc, n = tonumber(n) }
  end
  return out
end

local function server_us(srv)
  local t = srv:call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function metric_paused(port)
  local code, body = helper.http_get(port, "/metrics")
  assert.equal(200, code)
  return tonumber(body:match('\nluastream_paused{[^}]*group="work"[^}]*} (%d+)'))
end

local function pause(srv, ...)
  return helper.luastream("pause", "--redis", srv.url, "jobs", "work", ...)
end

local function resume(srv)
  return helper.luastream("resume", "--redis", srv.url, "jobs", "work")
end

describe("luastream pause and resume", function()
  after_each(helper.cleanup)

  it("pauses a group: status, /readyz and /metrics show it, read entries go back uncounted", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--http", "127.0.0.1:0" },
      { server = srv, dir = helper.handlers_dir({ ["jobs.lua"] = JOBS }) })
    local port = helper.health_port(host)
    host:wait_log(READY, 20, { plain = true })
    helper.publish(srv, "jobs", '{"n":1}')
    helper.wait_until(function() return #starts(srv) == 1 end, 20, "the first entry started")

    local code, out, err = pause(srv, "--reason", "deploy of v2")
    assert.equal(0, code, err)
    assert.truthy(out:find("paused group work of stream jobs until resumed", 1, true), out)
    assert.truthy(out:find("reason: deploy of v2", 1, true), out)
    assert.truthy(out:find("by: luastream pause by ", 1, true), out)
    assert.truthy(out:find("key: luastream:pause:{jobs}:work on " .. srv.url, 1, true), out)
    assert.equal("manual", srv:cli("HGET", "luastream:pause:{jobs}:work", "kind"))

    -- an operator's pause is shown, not an alert: status exits 0
    local scode, sout, serr = helper.luastream("status", "--redis", srv.url, "jobs")
    assert.equal(0, scode, sout .. serr)
    assert.truthy(sout:find("paused:\n  jobs work: paused by luastream pause by ", 1, true), sout)
    assert.truthy(sout:find("until resumed: deploy of v2", 1, true), sout)
    scode, sout = helper.luastream("status", "--json", "--redis", srv.url, "jobs")
    assert.equal(0, scode, sout)
    local doc = json.decode(sout)
    local p = doc.groups[1].pause
    assert.equal("paused", p.state)
    assert.equal("manual", p.kind)
    assert.equal("deploy of v2", p.reason)
    assert.equal(json.null, p.until_ms)
    assert.equal(json.null, p.left_ms)
    assert.equal("luastream:pause:{jobs}:work", p.key)
    assert.truthy(p.by:find("^luastream pause by "), p.by)

    -- an entry added now makes the host look at the pause (it may still
    -- start within 1 s of the pause: the promise is no start after that);
    -- one added once the host has seen the pause is not started
    helper.publish(srv, "jobs", '{"n":2}')
    host:wait_records({ msg = "subscription paused: no handler starts until it is resumed" }, 1, 20)
    local before = #starts(srv)
    helper.publish(srv, "jobs", '{"n":3}')
    local body = helper.wait_until(function()
      local c, b = helper.http_get(port, "/readyz")
      return c == 200 and b:find("\nnote: subscription jobs: paused by luastream pause by ", 1, true) and b
    end, 20, "/readyz 200 with the pause as a note")
    assert.truthy(body:find("until resumed: deploy of v2", 1, true), body)
    assert.truthy(body:find("^ready\n"), body)
    assert.equal(1, metric_paused(port))
    assert.equal(before, #starts(srv))

    code, out, err = resume(srv)
    assert.equal(0, code, err)
    assert.truthy(out:find("resumed group work of stream jobs (it was paused by luastream pause by ", 1, true), out)
    assert.truthy(out:find(": deploy of v2)", 1, true), out)
    helper.wait_until(function() return #starts(srv) == 3 end, 20, "every entry started")
    for _, st in ipairs(starts(srv)) do
      assert.equal("0", st.count, "entry " .. st.n .. ": a pause counts no delivery")
    end
    assert.equal(3, starts(srv)[3].n)
    helper.wait_until(function()
      local c, b = helper.http_get(port, "/readyz")
      return c == 200 and b == "ready\n"
    end, 20, "/readyz without the note")
    helper.wait_until(function() return metric_paused(port) == 0 end, 20, "luastream_paused 0")
    local _
    _, sout = helper.luastream("status", "--json", "--redis", srv.url, "jobs")
    assert.equal(json.null, json.decode(sout).groups[1].pause)

    code, out = resume(srv)
    assert.equal(0, code)
    assert.truthy(out:find("group work of stream jobs was not paused: nothing to resume", 1, true), out)
    assert.equal(0, host:stop())
  end)

  it("shows the pause on the supervisor's /readyz once, with the worker that saw it", function()
    local srv = helper.redis_start()
    local host = helper.host_start({ "--http", "127.0.0.1:0", "--processes", "2" },
      { server = srv, dir = helper.handlers_dir({ ["jobs.lua"] = JOBS }) })
    local port = helper.health_port(host)
    helper.wait_until(function()
      local c, b = helper.http_get(port, "/readyz")
      return c == 200 and b == "ready\n"
    end, 30, "every worker ready")
    local code, _, err = pause(srv, "--reason", "two workers")
    assert.equal(0, code, err)
    for i = 1, 4 do helper.publish(srv, "jobs", '{"n":' .. i .. "}") end
    local body = helper.wait_until(function()
      local c, b = helper.http_get(port, "/readyz")
      return c == 200 and b:find("\nnote: subscription jobs: paused by ", 1, true) and b
    end, 30, "/readyz 200 with the pause as a note")
    assert.truthy(body:find("two workers %(worker %d%)\n$"), body)
    local _, n = body:gsub("note: ", "")
    assert.equal(1, n, body)
    assert.equal(0, host:stop())
  end)

  it("pauses a partitioned handler's partitions together, by its base stream", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["jobs.lua"] = JOBS:gsub('workers = 2,', 'workers = 2, partitions = 2,') })
    for p = 0, 1 do srv:cli("XGROUP", "CREATE", "jobs:{" .. p .. "}", "work", "$", "MKSTREAM") end
    local code, _, err = pause(srv, "--reason", "both")
    assert.equal(0, code, err)
    assert.equal("", err, "the group is on its partitions: no warning")
    local out
    code, out = helper.luastream("status", "--redis", srv.url, dir)
    assert.equal(0, code, out)
    assert.truthy(out:find("jobs:{0} work: paused by luastream pause by [^\n]*until resumed: both"), out)
    assert.truthy(out:find("jobs:{1} work: paused by luastream pause by [^\n]*until resumed: both"), out)
    local _, js = helper.luastream("status", "--json", "--redis", srv.url, dir)
    for _, g in ipairs(json.decode(js).groups) do
      assert.equal("luastream:pause:{jobs}:work", g.pause.key, g.stream)
    end
  end)

  it("warns when the stream or the group does not exist (a name mistyped pauses nothing that runs)", function()
    local srv = helper.redis_start()
    srv:cli("XGROUP", "CREATE", "jobs", "work", "$", "MKSTREAM")
    local code, _, err = pause(srv)
    assert.equal(0, code, err)
    assert.equal("", err)
    code, _, err = helper.luastream("pause", "--redis", srv.url, "jobs", "wrok")
    assert.equal(0, code, err)
    assert.truthy(err:find("warning: stream jobs has no group wrok", 1, true), err)
    code, _, err = helper.luastream("pause", "--redis", srv.url, "jbos", "work")
    assert.equal(0, code, err)
    assert.truthy(err:find("warning: stream jbos does not exist", 1, true), err)
    code, _, err = helper.luastream("pause", "--redis", srv.url, "jobs:{1}", "work")
    assert.equal(0, code, err)
    assert.truthy(err:find("looks like a partition's stream", 1, true), err)
    code, _, err = helper.luastream("pause", "--redis", srv.url, "--reason", "two\nlines", "jobs", "work")
    assert.equal(2, code)
    assert.truthy(err:find("control characters", 1, true), err)
  end)

  it("says which server refused it, and refuses a bad --for", function()
    local port = helper.free_port()
    local code, _, err = helper.luastream("pause", "--redis", "redis://127.0.0.1:" .. port, "jobs", "work")
    assert.equal(1, code)
    assert.truthy(err:find("127.0.0.1:" .. port, 1, true), err)
    code, _, err = helper.luastream("pause", "--redis", "redis://127.0.0.1:" .. port, "--for", "0s", "jobs", "work")
    assert.equal(2, code)
    assert.truthy(err:find("--for", 1, true), err)
    code = helper.luastream("pause", "jobs")
    assert.equal(2, code)
    local out
    code, out = helper.luastream("pause", "--help")
    assert.equal(0, code)
    assert.truthy(out:find("usage: luastream pause", 1, true), out)
    -- a server that refuses the script: the key and the server named
    local srv = helper.redis_start()
    srv:cli("ACL", "SETUSER", "nopause", "on", ">pw", "~*", "+@all", "-eval")
    code, _, err = helper.luastream("pause", "--redis", srv.url:gsub("redis://", "redis://nopause:pw@"), "jobs", "work")
    assert.equal(1, code)
    assert.truthy(err:find("luastream:pause:{jobs}:work", 1, true), err)
    assert.truthy(err:find("NOPERM", 1, true) or err:find("permission", 1, true), err)
  end)

  it("shows a breaker's pause as needing attention in status", function()
    local srv = helper.redis_start()
    srv:cli("XGROUP", "CREATE", "jobs", "work", "$", "MKSTREAM")
    srv:call("EVAL", "local t = redis.call('TIME') local now = t[1] * 1000 " ..
      "redis.call('HSET', KEYS[1], 'kind', 'breaker', 'reason', 'payments-api 503', 'by', 'breaker of jobs', " ..
      "'since_ms', now, 'until_ms', now + 600000, 'last_ms', 600000, 'trips', 3) return 1",
      "1", "luastream:pause:{jobs}:work")
    local code, out = helper.luastream("status", "--redis", srv.url, "jobs")
    assert.equal(1, code, out)
    assert.truthy(out:find("needs attention:\n  jobs work: breaker open (trip 3), ", 1, true), out)
    assert.truthy(out:find("payments-api 503 (`luastream resume jobs work` ends it now)", 1, true), out)
    local _, js = helper.luastream("status", "--json", "--redis", srv.url, "jobs")
    local g = json.decode(js).groups[1]
    assert.equal("breaker", g.pause.kind)
    assert.equal(3, g.pause.trips)
    assert.equal("breaker-open", g.attention[1].kind)
    code, out = resume(srv)
    assert.equal(0, code)
    assert.truthy(out:find("its breaker open", 1, true), out)
  end)

  -- Three hosts, a steady stream of short entries: pause returns at T; no
  -- handler starts after T + 1 s on any host; resume brings work back, and
  -- so does the end of --for; nothing that was read and not started counts.
  it("stops every host within 1 s of pause returning, and resumes #slow", function()
    local srv = helper.redis_start()
    local dir = helper.handlers_dir({ ["jobs.lua"] = JOBS })
    local hosts = {}
    for i = 0, 2 do
      hosts[#hosts + 1] = helper.host_start({ "--instance", tostring(i) }, { server = srv, dir = dir })
    end
    for _, h in ipairs(hosts) do h:wait_log(READY, 20, { plain = true }) end
    -- a producer: 50 entries every 100 ms of short handlers (10 ms) for
    -- as long as the spec runs
    local n = 0
    local function feed(k)
      local cmds = {}
      for _ = 1, k do
        n = n + 1
        cmds[#cmds + 1] = { "XADD", "jobs", "*", "data", string.format('{"n":%d,"sleep":10}', n) }
      end
      srv:pipe(cmds)
    end
    local function run_for(seconds)
      local deadline = helper.now() + seconds
      while helper.now() < deadline do
        feed(50)
        os.execute("sleep 0.1")
      end
    end
    local function hosts_running()
      local seen = {}
      for _, s in ipairs(starts(srv)) do seen[s.n] = true end
      return seen
    end

    run_for(3)
    helper.wait_until(function() return #starts(srv) > 50 end, 30, "work started")
    local code, out, err = pause(srv, "--reason", "slow spec")
    local t_pause = server_us(srv) -- pause has returned: counted from here
    assert.equal(0, code, err .. out)
    run_for(4)
    -- when each handler started: its first log line's time (the redis
    -- record comes a round trip later, which a loaded machine stretches)
    local function late_starts(from_us, to_us)
      local late = {}
      for i, h in ipairs(hosts) do
        for _, rec in ipairs(h:records({ msg = "job started" })) do
          -- parse_time counts from 0000-03-01: 719468 days before the epoch
          local us = (helper.parse_time(rec.time) - 719468 * 86400) * 1000000
          if us > from_us and us < to_us then
            late[#late + 1] = string.format("host %d: n=%s at +%d ms", i, rec.n, math.floor((us - from_us) / 1000 + 1000))
          end
        end
      end
      return late
    end
    assert.same({}, late_starts(t_pause + 1000000, math.huge), "handlers started more than 1 s after pause returned")
    local before = #starts(srv)

    local _
    code, _, err = resume(srv)
    assert.equal(0, code, err)
    run_for(2)
    helper.wait_until(function() return #starts(srv) > before + 50 end, 30, "work resumed after resume")

    code, out, err = pause(srv, "--for", "2s", "--reason", "short")
    local t_for = server_us(srv)
    assert.equal(0, code, err)
    assert.truthy(out:find("(for 2s)", 1, true), out)
    local at_pause = #starts(srv)
    run_for(1.5)
    assert.same({}, late_starts(t_for + 1000000, t_for + 2000000), "no start between 1 s after pause and its end")
    run_for(2.5)
    helper.wait_until(function() return #starts(srv) > at_pause + 50 end, 30, "work resumed after --for")
    assert.equal(0, tonumber(srv:cli("EXISTS", "luastream:pause:{jobs}:work")))

    -- everything added runs, each entry once, none of its deliveries
    -- counted for the pauses
    helper.wait_until(function()
      local seen = hosts_running()
      for i = 1, n do
        if not seen[i] then return false end
      end
      return true
    end, 60, "every entry started")
    local counts = {}
    for _, s in ipairs(starts(srv)) do counts[s.count] = (counts[s.count] or 0) + 1 end
    assert.same({ ["0"] = #starts(srv) }, counts)
    assert.equal(n, #starts(srv), "each entry started once")
    for _, h in ipairs(hosts) do assert.equal(0, h:stop()) end
  end)
end)
